package netplane

import (
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// TestDeclareProjectsChangesOnly: a workload's declaration asks for a new
// projection when it is new or changed, and not when the same spec is
// applied again (thousands of unchanged specs re-applied project nothing);
// a workload that can shape no guard never asks.
func TestDeclareProjectsChangesOnly(t *testing.T) {
	p := &Plane{decls: map[string]Declaration{}}
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
		if got := p.declare(st.w); got != st.want {
			t.Errorf("%s: declare = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestHashedPortsFollowTheKind: a workload of a runtime of containers
// (containerd's, by driver.Capabilities) has its hashed endpoints in codefly's container mode,
// native and nix ones in the host mode, so a service run both ways at once
// never collides on a host port.
func TestHashedPortsFollowTheKind(t *testing.T) {
	s := &Plane{cfg: Config{ContainerPorts: func(k spec.Kind) bool { return k == spec.KindContainerd }}}
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
