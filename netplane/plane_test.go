package netplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// TestDeclareProjectsChangesOnly: a workload's declaration asks for a new
// projection when it is new or changed, and not when the same spec is
// applied again (thousands of unchanged specs re-applied project nothing);
// a workload that can shape no guard never asks.
func TestDeclareProjectsChangesOnly(t *testing.T) {
	p := &Plane{decls: map[string]Declaration{}, appliers: map[string]uint32{}}
	w := &spec.Workload{Name: "api", Network: spec.NetworkHost, Endpoints: []spec.Endpoint{{Name: "http", API: "http"}}}
	steps := []struct {
		name string
		w    *spec.Workload
		by   uint32
		want bool
	}{
		{"new", w, 0, true},
		{"the same again", w, 0, false},
		{"an equal copy", w.Clone(), 0, false},
		{"applied by another", w, 1000, true},
		{"by the same again", w, 1000, false},
		{"another endpoint", func() *spec.Workload {
			c := w.Clone()
			c.Endpoints = append(c.Endpoints, spec.Endpoint{Name: "admin"})
			return c
		}(), 1000, true},
		{"without endpoints, from with", &spec.Workload{Name: "api", Network: spec.NetworkHost}, 1000, true},
		{"without endpoints, again", &spec.Workload{Name: "api", Network: spec.NetworkHost}, 1000, false},
		{"batch job", &spec.Workload{Name: "job", Network: spec.NetworkHost}, 0, false},
	}
	for _, st := range steps {
		if got := p.declare(st.w, st.by); got != st.want {
			t.Errorf("%s: declare = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestUsersAreWhatThePlaneWasTold: a network's users are the workloads
// attached to it until released from it (one that moved is in both until
// the old network is released), and the quarantined ones its record names,
// or that may be anywhere while a run of theirs lives on.
func TestUsersAreWhatThePlaneWasTold(t *testing.T) {
	p := &Plane{members: map[string]map[string]bool{}, quarantined: map[string]Quarantined{
		"lost":   {Network: "b"},
		"adrift": {Running: true},
		"gone":   {},
	}}
	p.join("api", "a")
	p.join("web", "a")
	p.join("web", "b") // moved, not yet released from a
	steps := []struct {
		name   string
		do     func()
		a, b   string
		others string
	}{
		{"told", func() {}, "adrift (quarantined),api,web", "adrift (quarantined),lost (quarantined),web", "adrift (quarantined)"},
		{"web released from a", func() { p.leave("web", "a") }, "adrift (quarantined),api", "adrift (quarantined),lost (quarantined),web", "adrift (quarantined)"},
		{"lost attached", func() { p.join("lost", "c"); p.unquarantine("lost") }, "adrift (quarantined),api", "adrift (quarantined),web", "adrift (quarantined),lost"},
		{"adrift removed", func() { p.leave("adrift", "") }, "api", "web", "lost"},
		{"api removed", func() { p.leave("api", "") }, "", "web", "lost"},
	}
	for _, st := range steps {
		st.do()
		for network, want := range map[string]string{"a": st.a, "b": st.b, "c": st.others} {
			if got := strings.Join(p.users(network), ","); got != want {
				t.Errorf("%s: users of %s = %q, want %q", st.name, network, got, want)
			}
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

// TestInnerAddress: the host reaches a workload of a linked network at
// the link's inner end, and one of the host's network or of an island on
// loopback ("").
func TestInnerAddress(t *testing.T) {
	p := &Plane{links: map[string]*sandbox.Link{
		"linked": {Name: "fly-linked", Host: netip.MustParseAddr("10.90.0.1"), Inner: netip.MustParseAddr("10.90.0.2")},
	}}
	for network, want := range map[string]string{"linked": "10.90.0.2", "island": "", spec.NetworkHost: ""} {
		if got := p.InnerAddress(network); got != want {
			t.Errorf("InnerAddress(%s) = %q, want %q", network, got, want)
		}
	}
}
