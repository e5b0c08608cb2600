package netplane

// Declared reach as a pure function: which processes may open a
// connection to each endpoint of a network under `reach: declared`,
// derived from the declarations, never authored. An endpoint admits its
// own workload and the workloads whose `uses` name it (or one of its
// endpoints), whatever network each runs in; the daemon's own traffic,
// and every process that is no workload of this daemon, is never refused
// (the firewall tells them apart by their sockets' cgroups). Every way a
// namespace reaches the endpoint is guarded in that namespace: loopback
// in its own, the gateway at its host port from the other networks, its
// published port and its network's address from the host.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// NetAddrs are a linked network's addresses: its own (inside) and the
// host's end of its link (its gateway).
type NetAddrs struct {
	Inner, Gateway netip.Addr
}

// ReachWorld is what declared reach reads beyond World.
type ReachWorld struct {
	// Declared says which networks are under declared reach, the host's
	// as spec.NetworkHost.
	Declared map[string]bool
	// Cgroups are the running (or about to run) workloads' socket cgroup
	// ids; a workload without one admits and is admitted nothing yet.
	Cgroups map[string]uint64
	// NS are the isolated networks' namespace files, Addrs the linked
	// ones' addresses.
	NS    map[string]string
	Addrs map[string]NetAddrs
}

// Target is the endpoint a guarded destination of a namespace is.
type Target struct {
	Workload, Endpoint string
	Port               int
}

// ReachPlan is what declared reach comes to: a table per namespace (the
// host's first, NS ""), empty where nothing is guarded, every endpoint's
// allow-list, and which endpoint each guarded destination is.
type ReachPlan struct {
	Tables    []firewall.ReachTable
	Endpoints []status.ReachEndpoint
	targets   map[destKey]Target
}

type destKey struct {
	ns   string
	addr netip.Addr // invalid: through loopback
	port int
}

// Target names the endpoint of a destination a refusal was counted for.
func (p ReachPlan) Target(ns string, addr netip.Addr, port int) (Target, bool) {
	t, ok := p.targets[destKey{ns, addr, port}]
	return t, ok
}

// DeclaredReach derives every endpoint's allow-list and the tables that
// enforce them. A consumer that a caller other than root applied counts
// only for a producer the same caller applied, unless a policy selecting
// the producer admits `users` with `peers: true`. It is a pure function
// of its arguments.
func DeclaredReach(policies map[string]*spec.Policy, w World, r ReachWorld) ReachPlan {
	names := make([]string, 0, len(w.Decls))
	for n := range w.Decls {
		names = append(names, n)
	}
	sort.Strings(names)
	held := map[[3]string]int{} // workload, network, endpoint → port
	for _, res := range w.Reserved {
		held[[3]string{res.Workload, res.Network, res.Endpoint}] = res.Port
	}
	// The namespaces, the host's first.
	nss := []string{""}
	nsOf := map[string]string{spec.NetworkHost: ""}
	for _, n := range sortedKeys(r.NS) {
		nss = append(nss, r.NS[n])
		nsOf[n] = r.NS[n]
	}
	type dests struct {
		local  map[int][]uint64
		remote map[netip.AddrPort][]uint64
	}
	tables := map[string]*dests{}
	for _, ns := range nss {
		tables[ns] = &dests{local: map[int][]uint64{}, remote: map[netip.AddrPort][]uint64{}}
	}
	plan := ReachPlan{targets: map[destKey]Target{}}
	// Who uses whom, once: each producer's consumers, in name order.
	users := map[string][]use{}
	for _, u := range names {
		for _, entry := range w.Decls[u].Uses {
			name, ep, _ := strings.Cut(entry, "/")
			if name != u && !slices.ContainsFunc(users[name], func(x use) bool { return x.consumer == u && x.endpoint == "" }) {
				users[name] = append(users[name], use{consumer: u, endpoint: ep, entry: entry})
			}
		}
	}
	for _, x := range names {
		d := w.Decls[x]
		for _, e := range d.Endpoints {
			if e.External() {
				continue
			}
			port, ok := held[[3]string{x, d.Network, e.Name}]
			if !ok {
				continue
			}
			pub := 0
			if d.Network != spec.NetworkHost {
				pub = held[[3]string{x, spec.NetworkHost, e.Name}]
			}
			ep := status.ReachEndpoint{Workload: x, Endpoint: e.Name, Network: d.Network, Port: port, Published: pub, Declared: r.Declared[d.Network]}
			if !ep.Declared {
				plan.Endpoints = append(plan.Endpoints, ep)
				continue
			}
			// Where each namespace reaches it.
			where := map[string][]destKey{}
			add := func(ns string, addr netip.Addr, port int) {
				if _, ok := tables[ns]; !ok || port == 0 {
					return
				}
				k := destKey{ns, addr, port}
				where[ns] = append(where[ns], k)
				plan.targets[k] = Target{Workload: x, Endpoint: e.Name, Port: port}
			}
			if d.Network == spec.NetworkHost {
				add("", netip.Addr{}, port)
				for _, n := range sortedKeys(r.Addrs) {
					add(nsOf[n], r.Addrs[n].Gateway, port)
				}
			} else if own, ok := nsOf[d.Network]; ok {
				add(own, netip.Addr{}, port)
				if a, ok := r.Addrs[d.Network]; ok {
					add("", a.Inner, port)
				}
				add("", netip.Addr{}, pub)
				for _, n := range sortedKeys(r.Addrs) {
					add(nsOf[n], r.Addrs[n].Gateway, pub)
				}
			}
			ep.Admits = admits(x, e.Name, users[x], policies, w)
			// Every way in is guarded; an admitted workload that runs
			// is allowed the ways of its own namespace.
			allow := func(k destKey, ids ...uint64) {
				tb := tables[k.ns]
				if k.addr.IsValid() {
					ap := netip.AddrPortFrom(k.addr, uint16(k.port))
					tb.remote[ap] = append(tb.remote[ap], ids...)
				} else {
					tb.local[k.port] = append(tb.local[k.port], ids...)
				}
			}
			for _, ks := range where {
				for _, k := range ks {
					allow(k) // guarded, whoever is allowed
				}
			}
			for i, a := range ep.Admits {
				id, running := r.Cgroups[a.Workload]
				ep.Admits[i].Running = running
				if ns, ok := nsOf[w.Decls[a.Workload].Network]; running && ok {
					for _, k := range where[ns] {
						allow(k, id)
					}
				}
			}
			plan.Endpoints = append(plan.Endpoints, ep)
		}
	}
	for _, ns := range nss {
		d := tables[ns]
		t := firewall.ReachTable{NS: ns}
		for _, p := range sortedKeys(d.local) {
			t.Local = append(t.Local, firewall.LocalDest{Port: p, Allowed: ids(d.local[p])})
		}
		aps := make([]netip.AddrPort, 0, len(d.remote))
		for ap := range d.remote {
			aps = append(aps, ap)
		}
		slices.SortFunc(aps, func(a, b netip.AddrPort) int { return a.Compare(b) })
		for _, ap := range aps {
			t.Remote = append(t.Remote, firewall.RemoteDest{Addr: ap.Addr(), Port: int(ap.Port()), Allowed: ids(d.remote[ap])})
		}
		if ns == "" && len(t.Local) > 0 {
			// The networks reach the host's guarded ports at their
			// gateways alone, where their own tables guard them.
			for _, n := range sortedKeys(r.Addrs) {
				if l, ok := w.Links[n]; ok {
					t.Gateways = append(t.Gateways, firewall.Gateway{Link: l, Addr: r.Addrs[n].Gateway})
				}
			}
		}
		plan.Tables = append(plan.Tables, t)
	}
	return plan
}

// use is a consumer's entry in uses naming a producer (and, when not "",
// one of its endpoints).
type use struct{ consumer, endpoint, entry string }

// admits is the allow-list of x's endpoint e, by workload, with where
// each entry comes from: x itself, then its users.
func admits(x, e string, users []use, policies map[string]*spec.Policy, w World) []status.ReachAdmit {
	out := []status.ReachAdmit{{Workload: x, Why: "itself"}}
	open := ""
	for _, u := range users {
		if u.endpoint != "" && u.endpoint != e || len(out) > 1 && out[len(out)-1].Workload == u.consumer {
			continue
		}
		why := "uses: [" + spec.BareName(u.entry) + "]"
		if !w.sameLane(u.consumer, x) {
			if open == "" {
				open = peersPolicy(x, w.Decls[x].Network, policies)
			}
			if open == "-" {
				continue // a peer's uses never opens what another applied
			}
			why += fmt.Sprintf(" (a peer's, opened by policy %s)", open)
		}
		out = append(out, status.ReachAdmit{Workload: u.consumer, Why: why})
	}
	return out
}

// peersPolicy names a policy that admits x's users applied by callers
// other than root (`users: true` with `peers: true`), "-" when none does.
func peersPolicy(x, network string, policies map[string]*spec.Policy) string {
	for _, name := range sortedKeys(policies) {
		p := policies[name]
		if p.Ingress == nil || !slices.Contains(p.Select.Workloads, x) && !slices.Contains(p.Select.Networks, network) {
			continue
		}
		for _, r := range *p.Ingress {
			if r.From.Users && r.From.Peers {
				return name
			}
		}
	}
	return "-"
}

// ids sorts and dedupes cgroup ids.
func ids(in []uint64) []uint64 {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[K interface{ ~string | ~int }, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
