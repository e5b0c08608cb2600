package netplane

// A published port at connect(): the plane keeps the connect map (package
// connectmap) holding what the firewall forwards, each network's entries
// replaced as its rules are written and dropped with them, so that a
// host-local client is taken to the network once, at connect(), and its
// packets cross no NAT on the host. nftables' DNAT stays written for
// every port whatever the map holds: the map only takes a connection
// past it, and a daemon gone takes its programs with it.

import (
	"maps"
	"net/netip"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/connectmap"
	"github.com/flyd-dev/flyd/firewall"
)

// connectPlane is the map's contents, by network.
type connectPlane struct {
	// mu guards byNet and is held while the map is written, so that the
	// map holds what byNet says; taken after rulesMu, nothing under it.
	mu    sync.Mutex
	byNet map[string]map[netip.AddrPort]connectmap.Target
}

var hostLoopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// connectEntries are the published ports of a network the map takes at
// connect(): each at 127.0.0.1, where the host's clients dial it, to the
// network's address at its inner port, or at its ready replicas' ports
// in turn. Left to nftables: a group of more replicas than
// the map holds, one whose replicas have no port yet, and a group's port
// in a network under declared reach (its replicas' ports are guarded by
// their own allow-lists, not the group's). The rest of a network under
// declared reach goes through the map: the host's reach table guards the
// network's address at the inner port with the same allow-list as the
// published port, so what the table refuses at one it refuses at the
// other.
func connectEntries(n firewall.Net, declared bool) map[netip.AddrPort]connectmap.Target {
	out := map[netip.AddrPort]connectmap.Target{}
	if !n.Inner.Is4() {
		return out
	}
	for _, f := range n.Published {
		ports := f.Balance
		if len(ports) == 0 && f.Port > 0 {
			ports = []int{f.Port}
		}
		if len(ports) == 0 || len(ports) > connectmap.MaxPorts || len(f.Balance) > 0 && declared {
			continue
		}
		t := connectmap.Target{Addr: n.Inner}
		for _, p := range ports {
			t.Ports = append(t.Ports, uint16(p))
		}
		out[netip.AddrPortFrom(hostLoopback, uint16(f.HostPort))] = t
	}
	return out
}

// setConnect puts network's published ports in the map (n nil: drops
// them), and says so in the log when the map refuses.
func (p *Plane) setConnect(network string, n *firewall.Net) {
	if p.cfg.Connect == nil {
		return
	}
	var want map[netip.AddrPort]connectmap.Target
	if n != nil {
		want = connectEntries(*n, p.Doc(network).DeclaredReach())
	}
	p.connect.mu.Lock()
	defer p.connect.mu.Unlock()
	p.writeConnect(network, want)
}

// drainConnect takes out of the map, before the firewall is written with
// n, what n no longer forwards: a port gone, and a replica's port no
// longer balanced over (a replica stopping, which is stopped once the
// rules are written). What n adds waits for setConnect, after the
// firewall: the network's own rules for a port come first.
func (p *Plane) drainConnect(network string, n firewall.Net) {
	if p.cfg.Connect == nil {
		return
	}
	next := connectEntries(n, p.Doc(network).DeclaredReach())
	p.connect.mu.Lock()
	defer p.connect.mu.Unlock()
	p.writeConnect(network, drained(p.connect.byNet[network], next))
}

// drained is what of had stays while next is put in force: each entry
// next keeps, with the ports both have; an entry left with none, or
// taken elsewhere, goes.
func drained(had, next map[netip.AddrPort]connectmap.Target) map[netip.AddrPort]connectmap.Target {
	keep := map[netip.AddrPort]connectmap.Target{}
	for k, was := range had {
		is, ok := next[k]
		if !ok || is.Addr != was.Addr {
			continue
		}
		t := connectmap.Target{Addr: was.Addr}
		for _, port := range was.Ports {
			if slices.Contains(is.Ports, port) {
				t.Ports = append(t.Ports, port)
			}
		}
		if len(t.Ports) > 0 {
			keep[k] = t
		}
	}
	return keep
}

// writeConnect makes network's entries want and writes the map; the
// caller holds connect.mu.
func (p *Plane) writeConnect(network string, want map[netip.AddrPort]connectmap.Target) {
	m := p.cfg.Connect
	if p.connect.byNet == nil {
		p.connect.byNet = map[string]map[netip.AddrPort]connectmap.Target{}
	}
	if want == nil {
		delete(p.connect.byNet, network)
	} else {
		p.connect.byNet[network] = want
	}
	all := map[netip.AddrPort]connectmap.Target{}
	for _, es := range p.connect.byNet {
		maps.Copy(all, es)
	}
	if err := m.Set(all); err != nil {
		p.log.Warn("cannot put published ports in the connect map: nftables forwards them", zap.String("network", network), zap.Error(err))
	}
}

// PublishedPath says how a host-local client reaches a published port:
// through the connect map and nftables, or nftables alone and why.
func (p *Plane) PublishedPath() string {
	if p.cfg.Connect != nil {
		return "rewritten at connect() (BPF at " + p.cfg.Connect.Cgroup() + "), nftables DNAT beneath"
	}
	if p.cfg.ConnectOff != "" {
		return "nftables DNAT (BPF off: " + p.cfg.ConnectOff + ")"
	}
	return "nftables DNAT"
}
