package netplane

import (
	"maps"
	"reflect"
	"slices"

	"github.com/flyd-dev/flyd/spec"
)

// A workload's declaration is made when its spec is attached, before any
// port or network is made for it, and kept until it is released whole, so
// that rules written for a workload's first run already know it.

// declare records w's declaration and says whether the projection may
// change with it (ShapesGuards, before or after). A declaration the same
// as before changes nothing: re-applying thousands of unchanged specs
// projects nothing (their ports are looked at apart, in reserve).
func (p *Plane) declare(w *spec.Workload) (reproject bool) {
	d := declaredOf(w)
	p.declMu.Lock()
	defer p.declMu.Unlock()
	old, had := p.decls[w.Name]
	p.decls[w.Name] = d
	p.regroup(w.Name, old.Group, d.Group)
	if had && reflect.DeepEqual(old, d) {
		return false
	}
	// Uses shape the allow-lists of declared reach wherever the
	// workload runs.
	return d.ShapesGuards() || had && old.ShapesGuards() || !slices.Equal(old.Uses, d.Uses)
}

// declaredOf is w's declaration.
func declaredOf(w *spec.Workload) Declaration {
	return Declaration{Network: w.Network, Module: ModuleKey(w),
		Endpoints: slices.Clone(w.Endpoints), Uses: slices.Clone(w.Uses), Group: w.ReplicaOf}
}

func (p *Plane) undeclare(name string) {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	p.regroup(name, p.decls[name].Group, "")
	delete(p.decls, name)
	delete(p.serving, name)
}

// exposed says whether a workload's endpoint is exposed beyond the host.
func (p *Plane) exposed(workload, endpoint string) bool {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	for _, e := range p.decls[workload].Endpoints {
		if e.Name == endpoint {
			return e.Exposed()
		}
	}
	return false
}

// world is the plane's now, as a projection reads it.
func (p *Plane) world() World {
	p.declMu.Lock()
	decls := maps.Clone(p.decls)
	p.declMu.Unlock()
	w := World{Decls: decls, Links: map[string]string{}, Reserved: p.ports.All(), AppliedBy: p.cfg.AppliedBy}
	p.linkMu.Lock()
	for n, l := range p.links {
		w.Links[n] = l.Name
	}
	p.linkMu.Unlock()
	return w
}
