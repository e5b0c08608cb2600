package netplane

import (
	"fmt"
	"testing"

	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
)

// BenchmarkDeclaredReachProjection is the derivation for 1,000 workloads
// of one network under declared reach, each with an endpoint and 3 uses:
// what an apply that changes a uses computes before the firewall writes.
func BenchmarkDeclaredReachProjection(b *testing.B) {
	w := World{Decls: map[string]Declaration{}, Links: map[string]string{"ci": "fly-1"},
		AppliedBy: func(string) (uint32, bool) { return 0, true }}
	r := ReachWorld{Declared: map[string]bool{"ci": true}, Cgroups: map[string]uint64{},
		NS: map[string]string{"ci": "/run/flyd/netns/ci"}, Addrs: map[string]NetAddrs{}}
	name := func(i int) string { return fmt.Sprintf("w%d", i%1000) }
	for i := range 1000 {
		w.Decls[name(i)] = Declaration{Network: "ci", Endpoints: []spec.Endpoint{{Name: "tcp", API: "tcp"}},
			Uses: []string{name(i + 1), name(i + 2), name(i + 3)}}
		w.Reserved = append(w.Reserved, netalloc.Reservation{Network: "ci", Workload: name(i), Endpoint: "tcp", Port: 20000 + i})
		r.Cgroups[name(i)] = uint64(100000 + i)
	}
	for b.Loop() {
		p := DeclaredReach(nil, w, r)
		if n := len(p.Tables[1].Local); n != 1000 {
			b.Fatalf("%d ports guarded", n)
		}
	}
}
