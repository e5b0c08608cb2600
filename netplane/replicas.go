package netplane

import (
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
)

// A group of replicas is reached as one: it holds, by its own name, a port
// of each endpoint in its network and its published ports in the host's
// table, taken by its first replica's attach and freed by its last one's
// detach; each forwards to the ports of the group's replicas that are
// ready, in turn. Its consumers are given the group's ports.

// holder is who holds w's published ports: its group, or itself.
func holder(w *spec.Workload) string {
	if w.ReplicaOf != "" {
		return w.ReplicaOf
	}
	return w.Name
}

// Serving tells the plane whether a replica is ready for connections (it
// runs and, with a health check, has passed it): a group's published
// ports forward only to those that are. It rewrites its network's rules
// when that changes, and is a no-op for any other workload.
func (p *Plane) Serving(workload string, ready bool) {
	p.declMu.Lock()
	d, ok := p.decls[workload]
	changed := ok && d.Group != "" && p.serving[workload] != ready
	if changed {
		p.serving[workload] = ready
	}
	p.declMu.Unlock()
	if !changed || d.Network == spec.NetworkHost {
		return
	}
	if err := p.WriteRules(d.Network); err != nil {
		p.log.Warn("cannot balance a group's published ports", zap.String("workload", workload), zap.Error(err))
	}
}

// regroup moves a declared workload from group was to group is ("" for
// none) in the index of each group's replicas. declMu is held.
func (p *Plane) regroup(name, was, is string) {
	if was == is {
		return
	}
	if was != "" {
		delete(p.replicas[was], name)
		if len(p.replicas[was]) == 0 {
			delete(p.replicas, was)
		}
	}
	if is != "" {
		if p.replicas[is] == nil {
			p.replicas[is] = map[string]bool{}
		}
		p.replicas[is][name] = true
	}
}

// groupLeft says whether group has no replica declared any more.
func (p *Plane) groupLeft(group string) bool {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	return len(p.replicas[group]) == 0
}

// groupsNow is, of the declared replicas, the group of each, and the set
// of groups: read once for a whole rules write.
func (p *Plane) groupsNow() (groupOf map[string]string, groups map[string]bool) {
	p.declMu.Lock()
	defer p.declMu.Unlock()
	groupOf, groups = map[string]string{}, make(map[string]bool, len(p.replicas))
	for g, rs := range p.replicas {
		groups[g] = true
		for r := range rs {
			groupOf[r] = g
		}
	}
	return groupOf, groups
}

// balance is, by group, the inner ports of its replicas' endpoint in
// network that a published port forwards to: those of the ready ones, or
// of all while none is (a connection then reaches one that may answer,
// rather than nothing).
func (p *Plane) balance(network string) map[[2]string][]int {
	p.declMu.Lock()
	group, ready := map[string]string{}, map[string]bool{}
	for g, rs := range p.replicas {
		for name := range rs {
			if p.decls[name].Network == network {
				group[name], ready[name] = g, p.serving[name]
			}
		}
	}
	p.declMu.Unlock()
	if len(group) == 0 {
		return nil
	}
	all, up := map[[2]string][]int{}, map[[2]string][]int{}
	for _, r := range p.ports.In(network) {
		g, ok := group[r.Workload]
		if !ok {
			continue
		}
		k := [2]string{g, r.Endpoint}
		all[k] = append(all[k], r.Port)
		if ready[r.Workload] {
			up[k] = append(up[k], r.Port)
		}
	}
	for k, ports := range up {
		all[k] = ports
	}
	return all
}

// groupRequests are the group's own ports of w's endpoints in its network.
func groupRequests(w *spec.Workload) []netalloc.Request {
	var reqs []netalloc.Request
	for _, ep := range w.Endpoints {
		if !ep.External() {
			reqs = append(reqs, netalloc.Request{Endpoint: ep.Name, Mode: netalloc.ModeEphemeral})
		}
	}
	return reqs
}

// groupPort is the group's own port of an endpoint in network, 0 for none.
func (p *Plane) groupPort(group, network, endpoint string) int {
	for _, r := range p.ports.Held(network, group) {
		if r.Endpoint == endpoint {
			return r.Port
		}
	}
	return 0
}
