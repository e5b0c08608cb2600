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
