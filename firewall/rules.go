package firewall

import (
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// build adds the table's chains and rules for nets:
//
//	forward     (filter): replies pass; networks never reach each other;
//	            a network without egress forwards nothing.
//	input       (filter): a network without egress reaches nothing of the
//	            host but replies to what the host began.
//	postrouting (nat):    a network with egress leaves with the host's
//	            address (masquerade).
func build(c *nftables.Conn, t *nftables.Table, nets []Net) {
	accept := nftables.ChainPolicyAccept
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})

	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	rule(forward, replies(), verdict(expr.VerdictAccept))
	rule(forward, ifname(expr.MetaKeyIIFNAME, LinkPrefix, false), ifname(expr.MetaKeyOIFNAME, LinkPrefix, false), refuse())
	for _, n := range nets {
		if n.Egress {
			rule(post, saddrIn(n), ifname(expr.MetaKeyOIFNAME, n.Link, true), masquerade())
			continue
		}
		rule(forward, ifname(expr.MetaKeyIIFNAME, n.Link, false), refuse())
		rule(input, ifname(expr.MetaKeyIIFNAME, n.Link, false), replies(), verdict(expr.VerdictAccept))
		rule(input, ifname(expr.MetaKeyIIFNAME, n.Link, false), refuse())
	}
}

// ifname matches an interface name: whole (NUL-padded, as the kernel
// holds it) or, for a name ending in "-", as a prefix; negate inverts it.
func ifname(key expr.MetaKey, name string, negate bool) []expr.Any {
	data := []byte(name)
	if name[len(name)-1] != '-' {
		data = make([]byte, unix.IFNAMSIZ)
		copy(data, name)
	}
	op := expr.CmpOpEq
	if negate {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: data}}
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
func saddrIn(n Net) []expr.Any {
	mask := make([]byte, 4)
	for i := range n.Subnet.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	net := n.Subnet.Masked().Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: net[:]},
	}
}

// refuse rejects with an ICMP "administratively prohibited": a program
// that tries learns at once, instead of waiting out a connect timeout.
func refuse() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 13}}
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
