package netplane

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// reachPlane is the plane's part of declared reach: where the workloads'
// sockets are told apart, the cgroups last written, and the refusals
// counted (declared_watch.go).
type reachPlane struct {
	// mu guards the fields below up to watch, which has its own; it is
	// held while the cgroup tree is looked at once (reachTree), never
	// while the tables are written, and is taken while watch.mu is held
	// (noteRefusals), never the other way.
	mu sync.Mutex
	// tree is where the workloads are in the v2 cgroup tree; err why
	// declared reach cannot be enforced here, once looked at.
	tree   firewall.ReachTree
	err    error
	looked bool
	// ids are the cgroups the tables were last written with, names every
	// cgroup id seen (a refusal may be read after its workload went).
	ids   map[string]uint64
	names map[uint64]string
	// plan is the last plan written; written says a table may be in the
	// kernel, so that turning reach off removes them.
	plan    ReachPlan
	written bool
	watch   refusalBook
}

// reachTree says where the workloads' sockets are told apart, or why
// declared reach cannot be enforced on this host.
func (p *Plane) reachTree() (firewall.ReachTree, error) {
	r := &p.declared
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.looked {
		return r.tree, r.err
	}
	r.looked = true
	switch {
	case p.fw == nil:
		r.err = errors.New("it is enforced with nf_tables, and this daemon has none")
	case p.cfg.Cgroups == nil:
		r.err = errors.New("it tells workloads apart by their cgroups, and this daemon has none")
	default:
		st, err := p.cfg.Cgroups.SocketTree()
		if err != nil {
			r.err = err
			break
		}
		r.tree = firewall.ReachTree{Parent: st.Parent, Level: st.ParentLevel}
	}
	if r.err != nil {
		r.err = fmt.Errorf("%w: reach: declared cannot be enforced on this host: %w", errdefs.ErrRuntimeUnavailable, r.err)
	}
	return r.tree, r.err
}

// ReachAvailable says why declared reach cannot be enforced on this host,
// nil when it can: for a daemon asked to put its host network under it.
func (p *Plane) ReachAvailable() error {
	_, err := p.reachTree()
	return err
}

// declaredNets are the networks under declared reach, the host's as
// spec.NetworkHost.
func (p *Plane) declaredNets() map[string]bool {
	out := map[string]bool{}
	for n, d := range p.docs() {
		if d.DeclaredReach() {
			out[n] = true
		}
	}
	if p.cfg.HostReach {
		out[spec.NetworkHost] = true
	}
	return out
}

// reachWorld gathers what declared reach reads beyond w: the workloads'
// cgroups as they are now, and the networks' namespaces and addresses.
func (p *Plane) reachWorld(w World) ReachWorld {
	r := ReachWorld{Declared: p.declaredNets(), Cgroups: map[string]uint64{}, NS: map[string]string{}, Addrs: map[string]NetAddrs{}}
	if p.cfg.Cgroups != nil {
		for name := range w.Decls {
			if id, err := p.cfg.Cgroups.SocketID(name); err == nil {
				r.Cgroups[name] = id
			}
		}
	}
	names, err := p.nets.List()
	if err != nil {
		p.log.Warn("cannot list networks", zap.Error(err))
	}
	for _, n := range names {
		r.NS[n] = filepath.Join(p.nets.Dir(), n)
	}
	p.linkMu.Lock()
	for n, l := range p.links {
		r.Addrs[n] = NetAddrs{Inner: l.Inner, Gateway: l.Host}
	}
	p.linkMu.Unlock()
	return r
}

// writeReach puts declared reach in force for the world w; the caller
// holds docMu. Nothing is written while no network is under it and none
// was.
func (p *Plane) writeReach(policies map[string]*spec.Policy, w World) error {
	rw := p.reachWorld(w)
	r := &p.declared
	r.mu.Lock()
	written := r.written
	r.mu.Unlock()
	if len(rw.Declared) == 0 && !written {
		return nil
	}
	tree, err := p.reachTree()
	if err != nil {
		if len(rw.Declared) > 0 {
			return err
		}
		return nil
	}
	plan := DeclaredReach(policies, w, rw)
	if err := p.fw.SetReach(tree, plan.Tables); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plan, r.ids, r.written = plan, rw.Cgroups, len(rw.Declared) > 0
	if r.names == nil {
		r.names = map[uint64]string{}
	}
	for n, id := range rw.Cgroups {
		r.names[id] = n
	}
	return nil
}

// Placed tells the plane that a workload's cgroup was made (or made
// again), before its process starts: under declared reach its new cgroup
// is written into the rules first, so that it is allowed, and refused,
// from its first connection.
func (p *Plane) Placed(workload string) error {
	if p.cfg.Cgroups == nil || len(p.declaredNets()) == 0 {
		return nil
	}
	id, err := p.cfg.Cgroups.SocketID(workload)
	if err != nil {
		return nil //nolint:nilerr // no cgroup in the v2 tree: nothing to write
	}
	p.declared.mu.Lock()
	was, ok := p.declared.ids[workload]
	p.declared.mu.Unlock()
	if ok && was == id {
		return nil
	}
	return p.writeGuards()
}

// Reach lists every endpoint's derived allow-list (of name alone, when it
// is not ""), with the refusals counted against it.
func (p *Plane) Reach(name string) []status.ReachEndpoint {
	p.docMu.Lock()
	w := p.world()
	plan := DeclaredReach(p.policies, w, p.reachWorld(w))
	p.docMu.Unlock()
	refused := p.declared.watch.byTarget()
	var out []status.ReachEndpoint
	for _, e := range plan.Endpoints {
		if name != "" && e.Workload != name {
			continue
		}
		e.Refused = refused[e.Workload+"/"+e.Endpoint]
		out = append(out, e)
	}
	return out
}

// targetOf names the endpoint of a refusal's destination, and the
// workload of its cgroup.
func (p *Plane) targetOf(r firewall.Refusal) (from string, to Target, ok bool) {
	p.declared.mu.Lock()
	defer p.declared.mu.Unlock()
	from = p.declared.names[r.Cgroup]
	if from == "" {
		from = fmt.Sprintf("cgroup %d", r.Cgroup)
	}
	to, ok = p.declared.plan.Target(r.NS, r.Addr, r.Port)
	return from, to, ok
}
