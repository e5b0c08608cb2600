package netplane

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/flyd-dev/flyd/connectmap"
	"github.com/flyd-dev/flyd/firewall"
)

func TestConnectEntries(t *testing.T) {
	inner := netip.MustParseAddr("10.213.0.2")
	at := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port) }
	many := make([]int, connectmap.MaxPorts+1)
	for i := range many {
		many[i] = 9000 + i
	}
	n := firewall.Net{Inner: inner, Published: []firewall.Forward{
		{HostPort: 15432, Port: 5432},
		{HostPort: 18080, Port: 8081, Balance: []int{8081, 8082}, Exposed: true},
		{HostPort: 18090, Balance: nil},              // a group none of whose replicas has a port yet
		{HostPort: 18091, Port: 9000, Balance: many}, // more replicas than the map holds
	}}
	for _, c := range []struct {
		name     string
		declared bool
		want     map[netip.AddrPort]connectmap.Target
	}{
		{"reach off", false, map[netip.AddrPort]connectmap.Target{
			at(15432): {Addr: inner, Ports: []uint16{5432}},
			at(18080): {Addr: inner, Ports: []uint16{8081, 8082}},
		}},
		{"reach declared: groups stay on nftables", true, map[netip.AddrPort]connectmap.Target{
			at(15432): {Addr: inner, Ports: []uint16{5432}},
		}},
	} {
		if got := connectEntries(n, c.declared); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := connectEntries(firewall.Net{Published: n.Published}, false); len(got) != 0 {
		t.Errorf("a network without its address: %v, want none", got)
	}
}

// TestDrained: before the firewall stops forwarding to a port, the map
// stops taking connections to it; what is new waits.
func TestDrained(t *testing.T) {
	inner, other := netip.MustParseAddr("10.213.0.2"), netip.MustParseAddr("10.213.0.6")
	k1, k2 := netip.MustParseAddrPort("127.0.0.1:18080"), netip.MustParseAddrPort("127.0.0.1:18081")
	had := map[netip.AddrPort]connectmap.Target{
		k1: {Addr: inner, Ports: []uint16{8081, 8082, 8083}},
		k2: {Addr: inner, Ports: []uint16{5432}},
	}
	for _, c := range []struct {
		name       string
		next, want map[netip.AddrPort]connectmap.Target
	}{
		{"a replica stopping", map[netip.AddrPort]connectmap.Target{k1: {Addr: inner, Ports: []uint16{8081, 8083}}, k2: had[k2]},
			map[netip.AddrPort]connectmap.Target{k1: {Addr: inner, Ports: []uint16{8081, 8083}}, k2: had[k2]}},
		{"a replica turning ready waits", map[netip.AddrPort]connectmap.Target{k1: {Addr: inner, Ports: []uint16{8081, 8082, 8083, 8084}}, k2: had[k2]},
			had},
		{"a port gone", map[netip.AddrPort]connectmap.Target{k1: had[k1]},
			map[netip.AddrPort]connectmap.Target{k1: had[k1]}},
		{"a port moved elsewhere", map[netip.AddrPort]connectmap.Target{k1: had[k1], k2: {Addr: other, Ports: []uint16{5432}}},
			map[netip.AddrPort]connectmap.Target{k1: had[k1]}},
		{"no replica left in common", map[netip.AddrPort]connectmap.Target{k1: {Addr: inner, Ports: []uint16{9000}}},
			map[netip.AddrPort]connectmap.Target{}},
	} {
		if got := drained(had, c.next); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPublishedPath: what flyd status says of the way published ports go.
func TestPublishedPath(t *testing.T) {
	for _, c := range []struct {
		off, want string
	}{
		{"", "nftables DNAT"},
		{"attach BPF program flyd_connect4: operation not permitted", "nftables DNAT (BPF off: attach BPF program flyd_connect4: operation not permitted)"},
	} {
		p := &Plane{cfg: Config{ConnectOff: c.off}}
		if got := p.PublishedPath(); got != c.want {
			t.Errorf("off %q: %q, want %q", c.off, got, c.want)
		}
	}
}
