package supervisor

import (
	"reflect"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
)

// declared is what the firewall needs of a workload's spec: its network,
// its module and its endpoints. It is declared when the spec is applied,
// before any port or network is made for it, and kept until the
// workload is removed, so that rules written for a workload's first run
// already know it.
type declared struct {
	network, module string
	endpoints       []spec.Endpoint
	uses            []string
}

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
	return d.shapesGuards() || had && old.shapesGuards()
}

func declaredOf(w *spec.Workload) declared {
	d := declared{network: w.Network, endpoints: slices.Clone(w.Endpoints), uses: slices.Clone(w.Uses)}
	d.module = moduleKey(w)
	return d
}

// shapesGuards says whether the declaration can change the projection: a
// workload on the host's network without endpoints has no port to guard
// and no network that a policy could select or name as a peer (the host
// is never refused), so the guards are the same with it and without it.
// A burst of such applies (batch jobs) then projects nothing.
func (d declared) shapesGuards() bool {
	return d.network != spec.NetworkHost || len(d.endpoints) > 0
}

func (s *Supervisor) undeclare(name string) {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	delete(s.decls, name)
}

func (s *Supervisor) declarations() map[string]declared {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	out := make(map[string]declared, len(s.decls))
	for k, v := range s.decls {
		out[k] = v
	}
	return out
}

// exposed says whether a workload's endpoint is exposed beyond the host.
func (s *Supervisor) exposed(workload, endpoint string) bool {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	for _, e := range s.decls[workload].endpoints {
		if e.Name == endpoint {
			return e.Exposed()
		}
	}
	return false
}

// world is what a projection reads of the supervisor: the workloads'
// declarations, the networks' host links, the ports reserved, and who
// applied each workload. Projections are pure functions of it.
type world struct {
	decls    map[string]declared
	links    map[string]string // network → its host link
	reserved []netalloc.Reservation
	// appliedBy says who applied a workload; asked only of the users of a
	// `users` rule, so a projection of thousands pays for none unasked.
	appliedBy func(workload string) (uint32, bool)
}

// world is the supervisor's now.
func (s *Supervisor) world() world {
	w := world{decls: s.declarations(), links: map[string]string{}, reserved: s.ports.All(),
		appliedBy: func(name string) (uint32, bool) {
			wl, err := s.lookup(name)
			if err != nil {
				return 0, false
			}
			return wl.snapshot(false).AppliedBy, true
		}}
	s.linkMu.Lock()
	for n, l := range s.links {
		w.links[n] = l.Name
	}
	s.linkMu.Unlock()
	return w
}

// sameLane says whether consumer may reach producer on its declaration
// alone: root's workloads may, and a confined caller's only its own.
func (w world) sameLane(consumer, producer string) bool {
	by, ok := w.appliedBy(consumer)
	if !ok {
		return false
	}
	p, ok := w.appliedBy(producer)
	return by == 0 || ok && p == by
}

// reachRules projects the endpoints' visibilities onto the ports they hold:
// an internal port is reached from the host and its networks, a private
// one from the host and the networks of its module's workloads; public
// ports need no rule.
func reachRules(w world) []firewall.Reach {
	decls, links := w.decls, w.links
	moduleLinks := map[string][]string{}
	for _, d := range decls {
		if l, ok := links[d.network]; ok && d.module != "" {
			moduleLinks[d.module] = append(moduleLinks[d.module], l)
		}
	}
	for m, ls := range moduleLinks {
		slices.Sort(ls)
		moduleLinks[m] = slices.Compact(ls)
	}
	var out []firewall.Reach
	for _, r := range w.reserved {
		d, ok := decls[r.Workload]
		if !ok || d.network != r.Network {
			continue // a published port's host reservation, or a stale one
		}
		i := slices.IndexFunc(d.endpoints, func(e spec.Endpoint) bool { return e.Name == r.Endpoint })
		if i < 0 || d.endpoints[i].Reach() == spec.VisibilityPublic {
			continue
		}
		rr := firewall.Reach{Port: r.Port}
		if r.Network != spec.NetworkHost {
			l, ok := links[r.Network]
			if !ok {
				continue // an island: nothing reaches it but its own
			}
			rr.Link = l
		}
		if d.endpoints[i].Reach() == spec.VisibilityPrivate {
			rr.Private, rr.From = true, moduleLinks[d.module]
		}
		out = append(out, rr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Link != out[j].Link {
			return out[i].Link < out[j].Link
		}
		return out[i].Port < out[j].Port
	})
	return out
}

// usersOf derives an ingress rule's `users` peers for the guard of link:
// for each workload the policy selects there, an allow from the networks
// of the workloads that use it, at its endpoints' ports (or the rule's).
// A user on the host's network is the host, which is never refused. A
// user that a caller other than root applied counts only when peers says
// so (the rule's `peers: true`), or for a workload the same caller applied:
// declaring `uses` never opens, by itself, what someone else applied.
func usersOf(policy string, sel spec.Selector, link string, ports []spec.PolicyPort, peers bool, w world) []firewall.Allow {
	decls, links := w.decls, w.links
	var out []firewall.Allow
	names := make([]string, 0, len(decls))
	for n := range decls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, x := range names {
		d := decls[x]
		if links[d.network] != link || !slices.Contains(sel.Workloads, x) && !slices.Contains(sel.Networks, d.network) {
			continue
		}
		var from []string
		for _, u := range names {
			if l, ok := links[decls[u].network]; ok && slices.Contains(decls[u].uses, x) && (peers || w.sameLane(u, x)) {
				from = append(from, l)
			}
		}
		slices.Sort(from)
		a := allowOf(policy, slices.Compact(from), nil, ports)
		if len(ports) == 0 {
			for _, r := range w.reserved {
				if r.Workload == x && r.Network == d.network {
					a.Ports = append(a.Ports, firewall.Port{Proto: unix.IPPROTO_TCP, Port: r.Port})
				}
			}
			// The same rules from the same reservations, however the
			// table lists them.
			slices.SortFunc(a.Ports, func(x, y firewall.Port) int { return x.Port - y.Port })
			if len(a.Ports) == 0 {
				continue // no endpoint: nothing to reach
			}
		}
		out = append(out, a)
	}
	return out
}
