package supervisor

import (
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestHashedPortsFollowTheKind: a containerd workload's hashed endpoints
// take codefly's container mode, native and nix ones the host mode, so a
// service run both ways at once never collides on a host port.
func TestHashedPortsFollowTheKind(t *testing.T) {
	for _, tt := range []struct {
		kind spec.Kind
		want int
	}{{spec.KindNative, 56960}, {spec.KindNix, 56960}, {spec.KindContainerd, 47570}} {
		w := &spec.Workload{Name: "pg", Kind: tt.kind, Identity: &spec.Identity{Workspace: "demo", Module: "store", Service: "postgres"},
			Endpoints: []spec.Endpoint{{Name: "tcp", API: "tcp", Port: spec.Port{Mode: spec.PortHashed}, Publish: spec.Port{Mode: spec.PortHashed}}}}
		if got := requests(w)[0].Port; got != tt.want {
			t.Errorf("%s: hashed port %d, want %d", tt.kind, got, tt.want)
		}
		if got := publishRequests(w)[0].Port; got != tt.want {
			t.Errorf("%s: hashed published port %d, want %d", tt.kind, got, tt.want)
		}
	}
}

// TestEndpointVar: the names of used endpoints' variables are codefly's,
// built as codefly-dev/core v0.3.8 builds them
// (resources/environment_variables_manager.go,
// EndpointAsEnvironmentVariableKey: module, service, endpoint name and
// API joined by "__", "-" turned to "_", upper-cased; its own test,
// resources/endpoint_test.go TestEnvironmentVariables, expects
// CODEFLY__ENDPOINT__MOD__ORGANIZATION__REST__REST).
func TestEndpointVar(t *testing.T) {
	for _, tt := range []struct{ module, service, endpoint, api, want string }{
		{"mod", "organization", "rest", "rest", "CODEFLY__ENDPOINT__MOD__ORGANIZATION__REST__REST"},
		{"store", "pg-main", "http", "http", "CODEFLY__ENDPOINT__STORE__PG_MAIN__HTTP__HTTP"},
		{"my-mod", "api-gw", "grpc-in", "grpc", "CODEFLY__ENDPOINT__MY_MOD__API_GW__GRPC_IN__GRPC"},
	} {
		if got := EndpointVar(tt.module, tt.service, tt.endpoint, tt.api); got != tt.want {
			t.Errorf("EndpointVar(%q, %q, %q, %q) = %s, want %s", tt.module, tt.service, tt.endpoint, tt.api, got, tt.want)
		}
	}
}
