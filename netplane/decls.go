package netplane

import (
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/flyd-dev/flyd/spec"
)

// A workload's declaration is made when its spec is attached, before any
// port or network is made for it, and kept until it is released whole, so
// that rules written for a workload's first run already know it.

// declare records w's declaration and who applied it, and says whether
// the projection may change with them (ShapesGuards, before or after). A
// declaration the same as before changes nothing: re-applying thousands
// of unchanged specs projects nothing (their ports are looked at apart,
// in reserve).
func (p *Plane) declare(w *spec.Workload, by uint32) (reproject bool) {
	d := declaredOf(w)
	p.declMu.Lock()
	defer p.declMu.Unlock()
	old, had := p.decls[w.Name]
	oldBy := p.appliers[w.Name]
	p.decls[w.Name], p.appliers[w.Name] = d, by
	p.regroup(w.Name, old.Group, d.Group)
	if had && reflect.DeepEqual(old, d) && oldBy == by {
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
	delete(p.appliers, name)
	delete(p.serving, name)
}

// join puts a workload in a network, out of quarantine: it is that
// network's user until it is released from it.
func (p *Plane) join(name, network string) (was bool) {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	in := p.members[name]
	if in == nil {
		in = map[string]bool{}
		p.members[name] = in
	}
	was = in[network]
	in[network] = true
	return was
}

// leave takes a workload out of network, or out of every network and of
// quarantine for "".
func (p *Plane) leave(name, network string) {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	if network == "" {
		delete(p.members, name)
		delete(p.quarantined, name)
		return
	}
	delete(p.members[name], network)
	if len(p.members[name]) == 0 {
		delete(p.members, name)
	}
}

// unquarantine forgets that a workload's record did not load: it was
// attached with a spec of its own.
func (p *Plane) unquarantine(name string) {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	delete(p.quarantined, name)
}

// users names the workloads in a network, quarantined ones too, sorted.
func (p *Plane) users(network string) []string {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	var names []string
	for name, in := range p.members {
		if in[network] {
			names = append(names, name)
		}
	}
	for name, q := range p.quarantined {
		if q.in(network) {
			names = append(names, name+" (quarantined)")
		}
	}
	sort.Strings(names)
	return names
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
	decls, appliers := maps.Clone(p.decls), maps.Clone(p.appliers)
	p.declMu.Unlock()
	w := World{Decls: decls, Links: map[string]string{}, Reserved: p.ports.All(), AppliedBy: func(name string) (uint32, bool) {
		by, ok := appliers[name]
		return by, ok
	}}
	p.linkMu.Lock()
	for n, l := range p.links {
		w.Links[n] = l.Name
	}
	p.linkMu.Unlock()
	return w
}
