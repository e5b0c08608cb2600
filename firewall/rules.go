package firewall

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// build adds the table's chains and rules for nets:
//
//	prerouting, output (nat): a connection to a host address at a published
//	            port goes to its network (from elsewhere, and from the host);
//	            an internal endpoint's only at loopback and from networks.
//	forward     (filter): replies pass; a network without egress forwards
//	            nothing new, published ports of other networks included;
//	            published ports pass; networks never reach each other.
//	input       (filter): a network without egress reaches nothing of the
//	            host but replies to what the host began.
//	postrouting (nat):    a network with egress leaves with the host's
//	            address (masquerade), and what a published port takes into
//	            a network comes from the host's link address, so that its
//	            replies, to loopback or another network, come back.
//
// What arrives from "the host's networks" is matched against links, the
// set of this daemon's own links: another daemon's networks are not its
// to let in.
func build(c *nftables.Conn, t *nftables.Table, nets []Net, links *nftables.Set) error {
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		accept := nftables.ChainPolicyAccept
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
	}
	pre := chain("prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	out := chain("output", nftables.ChainTypeNAT, nftables.ChainHookOutput, nftables.ChainPriorityNATDest)
	forward := chain("forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	input := chain("input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	post := chain("postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)

	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	rule(forward, replies(), verdict(expr.VerdictAccept))
	// Before published ports pass: a network without egress reaches none
	// of them, its own at the host's address included.
	for _, n := range nets {
		if !n.Egress {
			rule(forward, ifname(expr.MetaKeyIIFNAME, n.Link, false), refuse())
		}
	}
	rule(forward, dnatted(), verdict(expr.VerdictAccept))
	// Between any two networks of flyd's, this daemon's or another's,
	// nothing but published ports: a refusal, which takes nothing from
	// another daemon that its own table does not take too.
	rule(forward, ifname(expr.MetaKeyIIFNAME, LinkPrefix, false), ifname(expr.MetaKeyOIFNAME, LinkPrefix, false), refuse())
	for _, n := range nets {
		for _, p := range n.Published {
			// A balancing map is bound to the one rule that uses it:
			// each rule gets its own.
			var err error
			to := func() []expr.Any {
				if len(p.Balance) < 2 {
					return dnat(n.Inner, p.Port)
				}
				e, merr := dnatTo(c, t, n.Inner, p.Balance)
				err = cmp.Or(err, merr)
				return e
			}
			if p.Exposed {
				rule(pre, toLocal(), tcpDport(p.HostPort), to())
				rule(out, toLocal(), tcpDport(p.HostPort), to())
			} else {
				rule(pre, inSet(expr.MetaKeyIIFNAME, links), toLocal(), tcpDport(p.HostPort), to())
				rule(out, addrIn(16, loopbackNet), tcpDport(p.HostPort), to())
			}
			if err != nil {
				return err
			}
		}
		if len(n.Published) > 0 {
			rule(post, ifname(expr.MetaKeyOIFNAME, n.Link, false), dnatted(), masquerade())
		}
		if n.Egress {
			rule(post, saddrIn(n), ifname(expr.MetaKeyOIFNAME, n.Link, true), masquerade())
			continue
		}
		rule(input, ifname(expr.MetaKeyIIFNAME, n.Link, false), replies(), verdict(expr.VerdictAccept))
		rule(input, ifname(expr.MetaKeyIIFNAME, n.Link, false), refuse())
	}
	return nil
}

// build6 adds the ip6 table's chains for the networks, which are IPv4
// alone (package sandbox turns IPv6 off at both ends of a link): nothing
// of IPv6 crosses a link, whatever a network's egress and policies, so
// that a link-local address turned on again (by root inside a network,
// or on a kernel that keeps IPv6 on) reaches none of the host's services
// on [::] and nothing beyond:
//
//	input   (filter): replies to what the host began, and neighbour
//	        discovery, which the host's own connections need, pass;
//	        everything else from a network's link is refused, TCP, UDP
//	        and ICMPv6 alike.
//	forward (filter): nothing to or from a network's link.
//
// The links are matched by their prefix, every daemon's: none of flyd's
// networks has IPv6, so refusing it takes nothing from another daemon's.
func build6(c *nftables.Conn, t *nftables.Table) {
	accept := nftables.ChainPolicyAccept
	chain := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	}
	input := chain("input", nftables.ChainHookInput)
	forward := chain("forward", nftables.ChainHookForward)
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(exprs...)})
	}
	fromLinks := ifname(expr.MetaKeyIIFNAME, LinkPrefix, false)
	rule(input, fromLinks, replies(), verdict(expr.VerdictAccept))
	rule(input, fromLinks, neighbourDiscovery(), verdict(expr.VerdictAccept))
	rule(input, fromLinks, refuse6())
	rule(forward, fromLinks, refuse6())
	rule(forward, ifname(expr.MetaKeyOIFNAME, LinkPrefix, false), refuse6())
}

// neighbourDiscovery matches ICMPv6 neighbour solicitations and
// advertisements (types 135 and 136).
func neighbourDiscovery() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{135}, ToData: []byte{136}},
	}
}

// refuse6 rejects with an ICMPv6 "administratively prohibited", refuse's
// IPv6 twin.
func refuse6() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 1}}
}

var loopbackNet = netip.MustParsePrefix("127.0.0.0/8")

// ifname matches an interface name: whole (NUL-padded, as the kernel
// holds it) or, for a name ending in "-", as a prefix; negate inverts it.
func ifname(key expr.MetaKey, name string, negate bool) []expr.Any {
	data := []byte(name)
	if name[len(name)-1] != '-' {
		data = ifnameKey(name)
	}
	op := expr.CmpOpEq
	if negate {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: data}}
}

// ownLinks adds the set of the links of nets, the daemon's own: rules
// that let the host's networks in match them alone.
func ownLinks(c *nftables.Conn, t *nftables.Table, nets map[string]Net) (*nftables.Set, error) {
	st := &nftables.Set{Table: t, Name: "links", KeyType: nftables.TypeIFName}
	elems := make([]nftables.SetElement, 0, len(nets))
	for _, n := range nets {
		elems = append(elems, nftables.SetElement{Key: ifnameKey(n.Link)})
	}
	if err := c.AddSet(st, elems); err != nil {
		return nil, fmt.Errorf("nftables set %s: %w", st.Name, err)
	}
	return st, nil
}

// inSet matches an interface name in a set of them.
func inSet(key expr.MetaKey, st *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Lookup{SourceRegister: 1, SetName: st.Name, SetID: st.ID}}
}

// replies matches packets of connections already established (or related
// to one).
func replies() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// saddrIn matches an IPv4 source address inside the network's subnet.
func saddrIn(n Net) []expr.Any { return addrIn(12, n.Subnet) }

// addrIn matches an IPv4 address of the network header at offset (12 the
// source, 16 the destination) inside pre.
func addrIn(offset uint32, pre netip.Prefix) []expr.Any {
	mask := make([]byte, 4)
	for i := range pre.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	net := pre.Masked().Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: net[:]},
	}
}

// refuse rejects with an ICMP "administratively prohibited": a program
// that tries learns at once, instead of waiting out a connect timeout.
func refuse() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 13}}
}

// buildInside adds a network's own rules, in its namespace: what reaches
// its address at a served port is handed to 127.0.0.1 (the namespace's
// eth0 has route_localnet, which allows it); what reaches a group's port,
// from outside or from inside at any address of its own, goes to
// 127.0.0.1 at the next of the group's replicas' ports.
func buildInside(c *nftables.Conn, t *nftables.Table, n Net) error {
	accept := nftables.ChainPolicyAccept
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(exprs...)})
	}
	for _, p := range n.Served {
		rule(pre, ifname(expr.MetaKeyIIFNAME, "eth0", false), tcpDport(p), dnat(loopback, p))
	}
	if len(n.Groups) == 0 {
		return nil
	}
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	for _, g := range n.Groups {
		if len(g.Balance) == 0 {
			continue // no replica has a port yet
		}
		for _, r := range []struct {
			ch    *nftables.Chain
			match []expr.Any
		}{{pre, ifname(expr.MetaKeyIIFNAME, "eth0", false)}, {out, toLocal()}} {
			to, err := dnatTo(c, t, loopback, g.Balance)
			if err != nil {
				return err
			}
			rule(r.ch, r.match, tcpDport(g.HostPort), to)
		}
	}
	return nil
}

var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// dnatTo sends a connection to addr at one of ports: the one, or the
// next of them in turn (dnatBalanced).
func dnatTo(c *nftables.Conn, t *nftables.Table, addr netip.Addr, ports []int) ([]expr.Any, error) {
	if len(ports) == 1 {
		return dnat(addr, ports[0]), nil
	}
	return dnatBalanced(c, t, addr, ports)
}

// toLocal matches a destination that is one of the host's own addresses.
func toLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// tcpDport matches TCP to port.
func tcpDport(port int) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(port))},
	}
}

// ifnameKey is an interface's name as the kernel compares it: IFNAMSIZ
// bytes, NUL-padded.
func ifnameKey(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// dnat sends the connection to addr:port.
func dnat(addr netip.Addr, port int) []expr.Any {
	a := addr.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(uint16(port))},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// dnatBalanced sends each new connection to addr at the next of ports in
// turn: a counter modulo their number, looked up in a map of port by
// count (nft's "dnat to ADDR : numgen inc mod N map { 0 : P0, … }"). A
// connection keeps its replica: NAT is decided on its first packet.
func dnatBalanced(c *nftables.Conn, t *nftables.Table, addr netip.Addr, ports []int) ([]expr.Any, error) {
	m := &nftables.Set{Table: t, Anonymous: true, Constant: true, IsMap: true,
		KeyType: nftables.TypeInteger, DataType: nftables.TypeInetService}
	elems := make([]nftables.SetElement, len(ports))
	for i, p := range ports {
		elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), Val: binaryutil.BigEndian.PutUint16(uint16(p))}
	}
	if err := c.AddSet(m, elems); err != nil {
		return nil, fmt.Errorf("nftables map of %d replicas' ports: %w", len(ports), err)
	}
	a := addr.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Numgen{Register: 2, Modulus: uint32(len(ports)), Type: unix.NFT_NG_INCREMENTAL},
		&expr.Lookup{SourceRegister: 2, DestRegister: 2, IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}, nil
}

// dnatted matches connections whose destination a rule rewrote.
func dnatted() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func masquerade() []expr.Any { return []expr.Any{&expr.Masq{}} }

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

// Exists reports whether a table is in the kernel, and how many rules it
// holds.
func Exists(table string) (bool, int, error) {
	c, err := nftables.New()
	if err != nil {
		return false, 0, unavailable(err)
	}
	defer c.CloseLasting()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, 0, err
	}
	for _, t := range tables {
		if t.Name != table {
			continue
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return true, 0, err
		}
		n := 0
		for _, ch := range chains {
			if ch.Table.Name != table {
				continue
			}
			rs, err := c.GetRules(t, ch)
			if err != nil {
				return true, n, err
			}
			n += len(rs)
		}
		return true, n, nil
	}
	return false, 0, nil
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit (linux/netfilter/
// nf_conntrack_common.h).
const ipsDstNAT = 1 << 5
