package supervisor

import (
	"reflect"
	"slices"

	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/spec"
)

// A workload's declaration (netplane.Declaration) is made when its spec is
// applied, before any port or network is made for it, and kept until the
// workload is removed, so that rules written for a workload's first run
// already know it.

// declare records w's declaration and says whether the projection may
// change with it (shapesGuards, before or after). A declaration the same
// as before changes nothing: re-applying thousands of unchanged specs
// projects nothing (their ports are looked at apart, in assignPorts).
func (s *Supervisor) declare(w *spec.Workload) (reproject bool) {
	d := declaredOf(w)
	s.declMu.Lock()
	defer s.declMu.Unlock()
	old, had := s.decls[w.Name]
	s.decls[w.Name] = d
	if had && reflect.DeepEqual(old, d) {
		return false
	}
	return d.ShapesGuards() || had && old.ShapesGuards()
}

// declaredOf is w's declaration. A burst of declarations that shape no
// guard (batch jobs on the host's network) projects nothing.
func declaredOf(w *spec.Workload) netplane.Declaration {
	return netplane.Declaration{Network: w.Network, Module: moduleKey(w),
		Endpoints: slices.Clone(w.Endpoints), Uses: slices.Clone(w.Uses)}
}

func (s *Supervisor) undeclare(name string) {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	delete(s.decls, name)
}

func (s *Supervisor) declarations() map[string]netplane.Declaration {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	out := make(map[string]netplane.Declaration, len(s.decls))
	for k, v := range s.decls {
		out[k] = v
	}
	return out
}

// exposed says whether a workload's endpoint is exposed beyond the host.
func (s *Supervisor) exposed(workload, endpoint string) bool {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	for _, e := range s.decls[workload].Endpoints {
		if e.Name == endpoint {
			return e.Exposed()
		}
	}
	return false
}

// world is the supervisor's now, as the network plane projects it.
func (s *Supervisor) world() netplane.World {
	w := netplane.World{Decls: s.declarations(), Links: map[string]string{}, Reserved: s.ports.All(),
		AppliedBy: func(name string) (uint32, bool) {
			wl, err := s.lookup(name)
			if err != nil {
				return 0, false
			}
			return wl.snapshot(false).AppliedBy, true
		}}
	s.linkMu.Lock()
	for n, l := range s.links {
		w.Links[n] = l.Name
	}
	s.linkMu.Unlock()
	return w
}
