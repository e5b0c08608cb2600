package supervisor

import (
	"testing"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
)

// capsOnly is a runtime as its capabilities say.
type capsOnly struct {
	driver.Driver
	caps driver.Capabilities
}

func (c capsOnly) Capabilities() driver.Capabilities { return c.caps }

// TestHashedPortsFollowTheKind: a workload of a runtime of containers
// (containerd's) has its hashed endpoints in codefly's container mode,
// native and nix ones in the host mode, so a service run both ways at once
// never collides on a host port.
func TestHashedPortsFollowTheKind(t *testing.T) {
	s := &Supervisor{drivers: map[spec.Kind]driver.Driver{
		spec.KindNative:     native.Driver{},
		spec.KindNix:        capsOnly{caps: driver.Capabilities{RuntimeContext: "nix"}},
		spec.KindContainerd: capsOnly{caps: driver.Capabilities{RuntimeContext: "container", ContainerPorts: true, ImageUser: true}},
	}}
	for _, tt := range []struct {
		kind spec.Kind
		want int
	}{{spec.KindNative, 56960}, {spec.KindNix, 56960}, {spec.KindContainerd, 47570}} {
		w := &spec.Workload{Name: "pg", Kind: tt.kind, Identity: &spec.Identity{Workspace: "demo", Module: "store", Service: "postgres"},
			Endpoints: []spec.Endpoint{{Name: "tcp", API: "tcp", Port: spec.Port{Mode: spec.PortHashed}, Publish: spec.Port{Mode: spec.PortHashed}}}}
		if got := s.requests(w)[0].Port; got != tt.want {
			t.Errorf("%s: hashed port %d, want %d", tt.kind, got, tt.want)
		}
		if got := s.publishRequests(w)[0].Port; got != tt.want {
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

// TestDeclareProjectsChangesOnly: a workload's declaration asks for a new
// projection when it is new or changed, and not when the same spec is
// applied again (thousands of unchanged specs re-applied project nothing);
// a workload that can shape no guard never asks.
func TestDeclareProjectsChangesOnly(t *testing.T) {
	s := &Supervisor{decls: map[string]netplane.Declaration{}}
	w := &spec.Workload{Name: "api", Network: spec.NetworkHost, Endpoints: []spec.Endpoint{{Name: "http", API: "http"}}}
	steps := []struct {
		name string
		w    *spec.Workload
		want bool
	}{
		{"new", w, true},
		{"the same again", w, false},
		{"an equal copy", w.Clone(), false},
		{"another endpoint", func() *spec.Workload {
			c := w.Clone()
			c.Endpoints = append(c.Endpoints, spec.Endpoint{Name: "admin"})
			return c
		}(), true},
		{"without endpoints, from with", &spec.Workload{Name: "api", Network: spec.NetworkHost}, true},
		{"without endpoints, again", &spec.Workload{Name: "api", Network: spec.NetworkHost}, false},
		{"batch job", &spec.Workload{Name: "job", Network: spec.NetworkHost}, false},
	}
	for _, st := range steps {
		if got := s.declare(st.w); got != st.want {
			t.Errorf("%s: declare = %v, want %v", st.name, got, st.want)
		}
	}
}
