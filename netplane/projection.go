package netplane

// The projection is the plane's pure part: what the policies and the
// endpoints' visibilities come to (the guards and the reach sets the
// firewall writes), from the workloads' declarations, the networks' links
// and the ports reserved, all read from a World. It keeps no state and
// makes nothing; the Plane gathers the World and puts the Projection in
// force through package firewall.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
	"golang.org/x/sys/unix"
)

// Declaration is what the network plane needs of a workload's spec: its
// network, its module (within its workspace) and its endpoints, and the
// workloads it uses.
type Declaration struct {
	Network, Module string
	Endpoints       []spec.Endpoint
	Uses            []string
	// Group is the group of replicas the workload is one of, or "".
	Group string
}

// ShapesGuards says whether the declaration can change the projection: a
// workload on the host's network without endpoints has no port to guard
// and no network that a policy could select or name as a peer (the host
// is never refused), so the guards are the same with it and without it.
func (d Declaration) ShapesGuards() bool {
	return d.Network != spec.NetworkHost || len(d.Endpoints) > 0
}

// World is what a projection reads of the supervisor: the workloads'
// declarations, the networks' host links, the ports reserved, and who
// applied each workload. Projections are pure functions of it.
type World struct {
	Decls    map[string]Declaration
	Links    map[string]string // network → its host link
	Reserved []netalloc.Reservation
	// AppliedBy says who applied a workload; asked only of the users of a
	// `users` rule, so a projection of thousands pays for none unasked.
	AppliedBy func(workload string) (uint32, bool)
}

// Projection is what the policies and visibilities come to: a guard per
// network the policies select, the ports visibilities guard, and what
// each policy could not put in force.
type Projection struct {
	Guards   []firewall.Guard
	Reach    []firewall.Reach
	Selects  map[string][]string // policy → the networks it guards
	Problems map[string][]string // policy → why some of it is not enforced
}

// Project projects policies onto the networks: a policy guards the
// networks it names and those of the workloads it names; its peers are
// networks by their links and workloads by their networks'. A name of
// nothing (yet) or of a workload on the host's network is left out, and
// said so. It is a pure function of its arguments.
func Project(policies map[string]*spec.Policy, w World) Projection {
	networkOf := map[string]string{}
	for name, d := range w.Decls {
		networkOf[name] = d.Network
	}
	links := w.Links
	pr := Projection{Selects: map[string][]string{}, Problems: map[string][]string{}, Reach: ReachRules(w)}
	say := func(policy, format string, args ...any) {
		pr.Problems[policy] = append(pr.Problems[policy], fmt.Sprintf(format, args...))
	}
	// networks resolves workloads and networks to the links of the
	// networks they are: what packets carry.
	networks := func(policy, field string, workloads, nets []string) []string {
		var out []string
		for _, w := range workloads {
			n, ok := networkOf[w]
			switch {
			case !ok:
				say(policy, "%s: no workload named %s (yet)", field, w)
			case n == spec.NetworkHost:
				say(policy, "%s: %s is on the host's network, which no policy can tell apart from the host", field, w)
			default:
				nets = append(nets, n)
			}
		}
		for _, n := range nets {
			if l, ok := links[n]; ok {
				out = append(out, l)
			} else {
				say(policy, "%s: network %s does not exist (yet)", field, n)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	byLink := map[string]*firewall.Guard{}
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := policies[name]
		selected := networks(name, "select", p.Select.Workloads, p.Select.Networks)
		for _, l := range selected {
			g := byLink[l]
			if g == nil {
				g = &firewall.Guard{Link: l}
				byLink[l] = g
			}
			if p.Ingress != nil {
				g.Ingress = addAllows(g.Ingress)
				for i, r := range *p.Ingress {
					// A rule of `users` alone names no peer of its own: its
					// allows are the users'.
					if a := allowOf(name, networks(name, fmt.Sprintf("ingress[%d].from", i), r.From.Workloads, r.From.Networks), r.From.CIDRs, r.Ports); len(a.Links)+len(a.CIDRs) > 0 || !r.From.Users {
						*g.Ingress = append(*g.Ingress, a)
					}
					if r.From.Users {
						*g.Ingress = append(*g.Ingress, usersOf(name, p.Select, l, r.Ports, r.From.Peers, w)...)
					}
				}
			}
			if p.Egress != nil {
				g.Egress = addAllows(g.Egress)
				for i, r := range *p.Egress {
					*g.Egress = append(*g.Egress, allowOf(name, networks(name, fmt.Sprintf("egress[%d].to", i), r.To.Workloads, r.To.Networks), r.To.CIDRs, r.Ports))
				}
			}
		}
		for _, l := range selected {
			for n, nl := range links {
				if nl == l {
					pr.Selects[name] = append(pr.Selects[name], n)
				}
			}
		}
		sort.Strings(pr.Selects[name])
		slices.Sort(pr.Problems[name])
		pr.Problems[name] = slices.Compact(pr.Problems[name])
	}
	ls := make([]string, 0, len(byLink))
	for l := range byLink {
		ls = append(ls, l)
	}
	sort.Strings(ls)
	for _, l := range ls {
		pr.Guards = append(pr.Guards, *byLink[l])
	}
	return pr
}

// addAllows is a guarded direction's allows, made when it is the first
// policy to guard it.
func addAllows(a *[]firewall.Allow) *[]firewall.Allow {
	if a == nil {
		a = &[]firewall.Allow{}
	}
	return a
}

func allowOf(policy string, links, cidrs []string, ports []spec.PolicyPort) firewall.Allow {
	a := firewall.Allow{Policy: policy, Links: links}
	for _, c := range cidrs {
		a.CIDRs = append(a.CIDRs, netip.MustParsePrefix(c)) // validated
	}
	for _, p := range ports {
		proto := map[string]uint8{spec.ProtocolTCP: unix.IPPROTO_TCP, spec.ProtocolUDP: unix.IPPROTO_UDP, spec.ProtocolICMP: unix.IPPROTO_ICMP}[p.Proto()]
		a.Ports = append(a.Ports, firewall.Port{Proto: proto, Port: p.Port})
	}
	return a
}

// sameLane says whether consumer may reach producer on its declaration
// alone: root's workloads may, and a confined caller's only its own.
func (w World) sameLane(consumer, producer string) bool {
	by, ok := w.AppliedBy(consumer)
	if !ok {
		return false
	}
	p, ok := w.AppliedBy(producer)
	return by == 0 || ok && p == by
}

// ReachRules projects the endpoints' visibilities onto the ports they hold:
// an internal port is reached from the host and its networks, a private
// one from the host and the networks of its module's workloads; public
// ports need no rule.
func ReachRules(w World) []firewall.Reach {
	decls, links := w.Decls, w.Links
	moduleLinks := map[string][]string{}
	for _, d := range decls {
		if l, ok := links[d.Network]; ok && d.Module != "" {
			moduleLinks[d.Module] = append(moduleLinks[d.Module], l)
		}
	}
	for m, ls := range moduleLinks {
		slices.Sort(ls)
		moduleLinks[m] = slices.Compact(ls)
	}
	// A group's own ports are guarded as its replicas' are.
	groups := map[string]Declaration{}
	for _, d := range decls {
		if d.Group != "" {
			groups[d.Group] = d
		}
	}
	var out []firewall.Reach
	for _, r := range w.Reserved {
		d, ok := decls[r.Workload]
		if !ok {
			d, ok = groups[r.Workload]
		}
		if !ok || d.Network != r.Network {
			continue // a published port's host reservation, or a stale one
		}
		i := slices.IndexFunc(d.Endpoints, func(e spec.Endpoint) bool { return e.Name == r.Endpoint })
		if i < 0 || d.Endpoints[i].Reach() == spec.VisibilityPublic {
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
		if d.Endpoints[i].Reach() == spec.VisibilityPrivate {
			rr.Private, rr.From = true, moduleLinks[d.Module]
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
func usersOf(policy string, sel spec.Selector, link string, ports []spec.PolicyPort, peers bool, w World) []firewall.Allow {
	decls, links := w.Decls, w.Links
	var out []firewall.Allow
	names := make([]string, 0, len(decls))
	for n := range decls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, x := range names {
		d := decls[x]
		if links[d.Network] != link || !slices.Contains(sel.Workloads, x) && !slices.Contains(sel.Networks, d.Network) {
			continue
		}
		var from []string
		for _, u := range names {
			if l, ok := links[decls[u].Network]; ok && slices.Contains(decls[u].Uses, x) && (peers || w.sameLane(u, x)) {
				from = append(from, l)
			}
		}
		slices.Sort(from)
		a := allowOf(policy, slices.Compact(from), nil, ports)
		if len(ports) == 0 {
			for _, r := range w.Reserved {
				if r.Workload == x && r.Network == d.Network {
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
