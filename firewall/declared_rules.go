package firewall

// What a reach table holds: its sets, their elements, its chains and rules.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The sets of a reach table.
const (
	setLocal         = "local"          // proto . port
	setLocalAllowed  = "local-allowed"  // cgroup . port
	setRemote        = "remote"         // addr . port
	setRemoteAllowed = "remote-allowed" // cgroup . addr . port
	setRefusedLocal  = "refused-local"  // cgroup . port, dynamic, counted
	setRefusedRemote = "refused-remote" // cgroup . addr . port, dynamic, counted
	setLinks         = "links"          // link
	setGateways      = "gateways"       // link . addr
)

// staticSets are the sets a reach table's elements are diffed in.
var staticSets = []string{setLocal, setLocalAllowed, setRemote, setRemoteAllowed, setLinks, setGateways}

var (
	localKeyType         = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
	localAllowedKeyType  = nftables.MustConcatSetType(nftables.TypeCGroupV2, nftables.TypeInetService)
	gatewayKeyType       = nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIPAddr)
	remoteKeyType        = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)
	remoteAllowedKeyType = nftables.MustConcatSetType(nftables.TypeCGroupV2, nftables.TypeIPAddr, nftables.TypeInetService)
)

// declaredElements are a table's elements by set: the keys as the kernel
// holds them (each field padded to 32 bits; a cgroup id in host order, as
// the socket expression loads it).
func declaredElements(t ReachTable) map[string][][]byte {
	out := map[string][][]byte{}
	for _, name := range staticSets {
		out[name] = [][]byte{}
	}
	for _, g := range t.Gateways {
		a := g.Addr.As4()
		out[setLinks] = append(out[setLinks], ifnameKey(g.Link))
		out[setGateways] = append(out[setGateways], slices.Concat(ifnameKey(g.Link), a[:]))
	}
	for _, d := range t.Local {
		out[setLocal] = append(out[setLocal], tcpKey(d.Port))
		for _, id := range d.Allowed {
			out[setLocalAllowed] = append(out[setLocalAllowed], slices.Concat(cgroupKey(id), portKey(d.Port)))
		}
	}
	for _, d := range t.Remote {
		a := d.Addr.As4()
		out[setRemote] = append(out[setRemote], slices.Concat(a[:], portKey(d.Port)))
		for _, id := range d.Allowed {
			out[setRemoteAllowed] = append(out[setRemoteAllowed], slices.Concat(cgroupKey(id), a[:], portKey(d.Port)))
		}
	}
	for name, keys := range out {
		slices.SortFunc(keys, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })
		out[name] = slices.CompactFunc(keys, slices.Equal)
	}
	return out
}

func cgroupKey(id uint64) []byte { return binaryutil.NativeEndian.PutUint64(id) }

// portKey is a port as a key's field: two bytes in network order, padded.
func portKey(port int) []byte { return []byte{byte(port >> 8), byte(port), 0, 0} }

// chunk is how many elements go in one message: a netlink attribute's
// length is 16 bits, and the list of a message's elements is one
// attribute (a thousand of the longest keys here take about 28 KiB).
const chunk = 1000

// inChunks calls f for keys, chunk keys at a time.
func inChunks(keys [][]byte, f func([][]byte) error) error {
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		if err := f(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

func elements(keys [][]byte) []nftables.SetElement {
	out := make([]nftables.SetElement, len(keys))
	for i, k := range keys {
		out[i] = nftables.SetElement{Key: k}
	}
	return out
}

// diffKeys are the keys of before not in after, and of after not in
// before.
func diffKeys(before, after [][]byte) (gone, added [][]byte) {
	in := func(ks [][]byte) map[string]bool {
		m := make(map[string]bool, len(ks))
		for _, k := range ks {
			m[string(k)] = true
		}
		return m
	}
	was, is := in(before), in(after)
	for _, k := range before {
		if !is[string(k)] {
			gone = append(gone, k)
		}
	}
	for _, k := range after {
		if !was[string(k)] {
			added = append(added, k)
		}
	}
	return gone, added
}

// buildDeclared adds a reach table's chains, sets and rules.
func buildDeclared(c *nftables.Conn, t *nftables.Table, tree ReachTree, elems map[string][][]byte, host bool) error {
	sets := map[string]*nftables.Set{}
	add := func(name string, kt nftables.SetDatatype, dynamic bool) error {
		st := &nftables.Set{Table: t, Name: name, KeyType: kt, Concatenation: len(nftables.ConcatSetTypeElements(kt)) > 1}
		if dynamic {
			st.Dynamic, st.Counter, st.Size = true, true, refusedSize
		}
		if err := c.AddSet(st, nil); err != nil {
			return fmt.Errorf("nftables set %s: %w", name, err)
		}
		sets[name] = st
		if dynamic {
			return nil
		}
		return inChunks(elems[name], func(ks [][]byte) error { return c.SetAddElements(st, elements(ks)) })
	}
	for _, s := range []struct {
		name    string
		kt      nftables.SetDatatype
		dynamic bool
	}{
		{setLocal, localKeyType, false}, {setLocalAllowed, localAllowedKeyType, false},
		{setRemote, remoteKeyType, false}, {setRemoteAllowed, remoteAllowedKeyType, false},
		{setRefusedLocal, localAllowedKeyType, true}, {setRefusedRemote, remoteAllowedKeyType, true},
		{setLinks, nftables.TypeIFName, false}, {setGateways, gatewayKeyType, false},
	} {
		if err := add(s.name, s.kt, s.dynamic); err != nil {
			return err
		}
	}
	accept := nftables.ChainPolicyAccept
	base := c.AddChain(&nftables.Chain{Name: "reach", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityMangle, Policy: &accept})
	check := c.AddChain(&nftables.Chain{Name: "reach-check", Table: t})
	rule := func(ch *nftables.Chain, ud []byte, exprs ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(exprs...), UserData: ud})
	}
	const r0 = unix.NFT_REG32_00
	// A workload's connection attempt: a SYN from a socket below the
	// parent. A socket the kernel cannot place (none, or not a full one)
	// ends the rule unmatched: it passes.
	parent := []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: uint32(tree.Level), Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: cgroupKey(tree.Parent)},
	}
	rule(base, userdata.AppendString(nil, userdata.TypeComment, marker(tree)),
		synOnly(), parent, []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: check.Name}})

	cg := []expr.Any{&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: uint32(tree.Level + 1), Register: r0}}
	dport := func(reg uint32) []expr.Any {
		return []expr.Any{&expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}}
	}
	// Register 1 is the first four 32-bit registers: a match that uses it
	// (ipv4, lo) comes before the key is loaded.
	ipv4 := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
	daddr := func(reg uint32) []expr.Any {
		return []expr.Any{&expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}}
	}
	lookup := func(st *nftables.Set) []expr.Any {
		return []expr.Any{&expr.Lookup{SourceRegister: r0, SetName: st.Name, SetID: st.ID}}
	}
	update := func(st *nftables.Set) []expr.Any {
		return []expr.Any{&expr.Dynset{SrcRegKey: r0, SetName: st.Name, SetID: st.ID, Operation: uint32(unix.NFT_DYNSET_OP_UPDATE)}}
	}
	lo := ifname(expr.MetaKeyOIFNAME, "lo", false)
	guardedLocal := slices.Concat(lo, protoPortTo(r0), lookup(sets[setLocal]))
	reset := []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}
	acceptV := verdict(expr.VerdictAccept)
	// Through loopback: this namespace's own endpoints.
	rule(check, nil, lo, cg, dport(r0+2), lookup(sets[setLocalAllowed]), acceptV)
	rule(check, nil, guardedLocal, cg, dport(r0+2), update(sets[setRefusedLocal]))
	rule(check, nil, guardedLocal, reset)
	// Beyond it: the gateway, another network's address.
	guardedRemote := slices.Concat(ipv4, daddr(r0), dport(r0+1), lookup(sets[setRemote]))
	rule(check, nil, ipv4, cg, daddr(r0+2), dport(r0+3), lookup(sets[setRemoteAllowed]), acceptV)
	rule(check, nil, guardedRemote, cg, daddr(r0+2), dport(r0+3), update(sets[setRefusedRemote]))
	rule(check, nil, guardedRemote, reset)

	// On the host: a network reaches a guarded port of the host's at its
	// gateway, which its own table guards, and at no other address of
	// the host's (before the NAT that would take a published port on). A
	// network's namespace has no such chain: every packet it receives
	// would pay for it.
	if !host {
		return nil
	}
	pre := c.AddChain(&nftables.Chain{Name: "reach-gateways", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle, Policy: &accept})
	iif := &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: r0}
	rule(pre, nil, synOnly(), []expr.Any{iif, &expr.Lookup{SourceRegister: r0, SetName: sets[setLinks].Name, SetID: sets[setLinks].ID}},
		ipv4, []expr.Any{iif}, daddr(r0+4), lookup(sets[setGateways]), acceptV)
	rule(pre, nil, synOnly(), []expr.Any{iif, &expr.Lookup{SourceRegister: r0, SetName: sets[setLinks].Name, SetID: sets[setLinks].ID}},
		toLocal(), protoPortTo(r0), lookup(sets[setLocal]), reset)
	return nil
}

// synOnly matches a TCP segment that begins a connection: SYN without ACK.
func synOnly() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
	}
}
