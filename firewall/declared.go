package firewall

// Declared reach: an endpoint under it admits only the processes of the
// workloads allowed it. The workloads of one namespace share its
// addresses, so a packet's address cannot tell them apart; the socket that
// sends it can. The kernel stamps every socket with the v2 cgroup of the
// process that made it, and nftables' `socket cgroupv2 level N` reads it,
// but only where the sending socket is still the packet's: in the output
// hook of the client's own namespace (at the input of a server, and across
// a veth, the packet has left its socket, and the lookup finds the
// server's). So each namespace gets a table of its own, `inet flyd-reach`
// (the host's is named after the daemon's table), whose output chain sees
// every connection a process of that namespace begins:
//
//	reach        (filter, output, before NAT): a TCP SYN from a socket of a
//	             workload of this daemon (its cgroup below the daemon's
//	             parent) goes to reach-check; anything else (the daemon's
//	             own probes, `flyd exec`, every process outside flyd's
//	             workloads, replies, packets of connections already made)
//	             passes.
//	reach-check  (regular): a SYN to a guarded destination passes when its
//	             socket's cgroup is allowed that destination; otherwise it
//	             is counted in a refused set and answered with a TCP reset,
//	             so the program sees "connection refused" at once.
//
// A guarded destination is a port reached through loopback (an endpoint
// of the namespace, or on the host a published port before its DNAT), or
// an address and port beyond it (the gateway of an isolated network, the
// address of another network's endpoint). Everything that changes is an
// element of a set: a grant added or removed is one small transaction,
// takes effect at the next connect and leaves connections already made
// alone. The refused sets are the kernel's record of every refusal, by
// cgroup and destination, with counters: the daemon reads them instead of
// taking a message per refused packet, and they outlive a daemon restart.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// ReachTree is where the daemon's workloads are in the v2 cgroup tree:
// their parent's cgroup id and level. A socket whose cgroup is not below
// Parent is not a workload's, and is never refused.
type ReachTree struct {
	Parent uint64
	Level  int
}

// ReachTable is what one namespace's processes may connect to among the
// destinations under declared reach.
type ReachTable struct {
	// NS is the namespace's file; "" is the host's own namespace.
	NS     string
	Local  []LocalDest
	Remote []RemoteDest
	// Gateways, of the host's table, are the networks' links and the
	// host's address on each: a network reaches a Local destination of
	// the host's only at its gateway, where its own table guards it.
	Gateways []Gateway
}

// Gateway is a network's link and the host's address on it.
type Gateway struct {
	Link string
	Addr netip.Addr
}

// LocalDest is a port reached through the namespace's loopback, and the
// cgroups allowed it.
type LocalDest struct {
	Port    int
	Allowed []uint64
}

// RemoteDest is an IPv4 address and port beyond the namespace, and the
// cgroups allowed it.
type RemoteDest struct {
	Addr    netip.Addr
	Port    int
	Allowed []uint64
}

// Refusal is what the kernel counted of the refused connections of one
// cgroup to one destination of a namespace: Addr is invalid for a local
// destination.
type Refusal struct {
	NS     string
	Cgroup uint64
	Addr   netip.Addr
	Port   int
	Count  uint64
}

// refusedSize bounds each refused set: past it a refusal is still
// refused, only not counted by its pair.
const refusedSize = 65536

// reachTableName is the reach table's name in a namespace: the host's is
// the daemon's own table's name with "-reach", a network's namespace is
// the daemon's alone.
func (f *Firewall) reachTableName(ns string) string {
	if ns == "" {
		return f.table + "-reach"
	}
	return "flyd-reach"
}

// reachState is what a namespace's reach table holds, as written.
type reachState struct {
	tree ReachTree
	sets map[string][][]byte // set name → element keys
}

// SetReach puts the tables in force: each namespace's table is made,
// changed element by element, or deleted when it has no destination. A
// namespace not in tables is gone (its table with it) and forgotten. A
// table a daemon wrote before (one killed included) is taken as the
// kernel holds it, so a restarted daemon that projects the same tables
// changes nothing.
func (f *Firewall) SetReach(tree ReachTree, tables []ReachTable) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reach == nil {
		f.reach = map[string]*reachState{}
	}
	listed := make(map[string]bool, len(tables))
	for _, t := range tables {
		listed[t.NS] = true
	}
	maps.DeleteFunc(f.reach, func(ns string, _ *reachState) bool { return !listed[ns] })
	var errs []error
	for _, t := range tables {
		if err := f.setReach(tree, t); err != nil {
			where := "the host"
			if t.NS != "" {
				where = t.NS
			}
			errs = append(errs, fmt.Errorf("reach rules of %s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

func (f *Firewall) setReach(tree ReachTree, t ReachTable) error {
	c, done, err := connIn(t.NS)
	if err != nil {
		return err
	}
	defer done()
	tbl := &nftables.Table{Name: f.reachTableName(t.NS), Family: nftables.TableFamilyINet}
	want := declaredElements(t)
	empty := len(t.Local) == 0 && len(t.Remote) == 0
	have, ok := f.reach[t.NS]
	if !ok {
		if have, err = readReach(c, tbl); err != nil {
			return err
		}
	}
	switch {
	case empty && have == nil:
		f.reach[t.NS] = nil
		return nil
	case empty:
		c.DelTable(tbl)
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		f.reach[t.NS] = nil
		return nil
	case have == nil || have.tree != tree:
		c.AddTable(tbl)
		c.DelTable(tbl)
		if err := buildDeclared(c, c.AddTable(tbl), tree, want, t.NS == ""); err != nil {
			return err
		}
	default:
		changed := false
		for name, keys := range want {
			gone, added := diffKeys(have.sets[name], keys)
			st := &nftables.Set{Table: tbl, Name: name}
			if err := inChunks(gone, func(ks [][]byte) error { return c.SetDeleteElements(st, elements(ks)) }); err != nil {
				return err
			}
			if err := inChunks(added, func(ks [][]byte) error { return c.SetAddElements(st, elements(ks)) }); err != nil {
				return err
			}
			changed = changed || len(gone)+len(added) > 0
		}
		if !changed {
			f.reach[t.NS] = have
			return nil
		}
	}
	if err := c.Flush(); err != nil {
		delete(f.reach, t.NS) // unknown: read again next time
		return err
	}
	f.reach[t.NS] = &reachState{tree: tree, sets: want}
	return nil
}

// connIn opens an nftables connection in a namespace ("" the host's).
func connIn(ns string) (*nftables.Conn, func(), error) {
	if ns == "" {
		c, err := nftables.New(nftables.WithSockOptions(roomyWrites))
		if err != nil {
			return nil, nil, unavailable(err)
		}
		return c, func() { _ = c.CloseLasting() }, nil
	}
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &pathError{"open", ns, err}
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd), nftables.WithSockOptions(roomyWrites))
	if err != nil {
		unix.Close(fd)
		return nil, nil, unavailable(err)
	}
	return c, func() { _ = c.CloseLasting(); unix.Close(fd) }, nil
}

type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

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

// marker is the comment of a reach table's first rule: what a starting
// daemon checks to take a table as its own and as it would write it.
func marker(tree ReachTree) string {
	return "flyd reach 1 parent " + strconv.FormatUint(tree.Parent, 10) + " level " + strconv.Itoa(tree.Level)
}

// readReach reads a reach table a daemon wrote before: nil when there is
// none, or one this daemon would not have written (its rules are then
// replaced whole).
func readReach(c *nftables.Conn, tbl *nftables.Table) (*reachState, error) {
	if _, err := c.ListTableOfFamily(tbl.Name, tbl.Family); err != nil {
		if errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), "no such file") {
			return nil, nil
		}
		return nil, err
	}
	rules, err := c.GetRules(tbl, &nftables.Chain{Name: "reach", Table: tbl})
	if err != nil || len(rules) == 0 {
		return nil, nil //nolint:nilerr // not as written: rewritten whole
	}
	comment, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment)
	comment = strings.TrimRight(comment, "\x00")
	var tree ReachTree
	if _, err := fmt.Sscanf(comment, "flyd reach 1 parent %d level %d", &tree.Parent, &tree.Level); err != nil || comment != marker(tree) {
		return nil, nil
	}
	st := &reachState{tree: tree, sets: map[string][][]byte{}}
	for _, name := range staticSets {
		elems, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			return nil, nil //nolint:nilerr // a set missing: rewritten whole
		}
		keys := make([][]byte, 0, len(elems))
		for _, e := range elems {
			keys = append(keys, e.Key)
		}
		st.sets[name] = keys
	}
	return st, nil
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

// Refusals reads the refused sets of every namespace that has a reach
// table: a count per cgroup and destination since the table was made.
func (f *Firewall) Refusals() ([]Refusal, error) {
	f.mu.Lock()
	nss := make([]string, 0, len(f.reach))
	for ns, st := range f.reach {
		if st != nil {
			nss = append(nss, ns)
		}
	}
	f.mu.Unlock()
	slices.Sort(nss)
	var out []Refusal
	var errs []error
	for _, ns := range nss {
		rs, err := f.refusalsIn(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, rs...)
	}
	return out, errors.Join(errs...)
}

func (f *Firewall) refusalsIn(ns string) ([]Refusal, error) {
	c, done, err := connIn(ns)
	if err != nil {
		return nil, err
	}
	defer done()
	tbl := &nftables.Table{Name: f.reachTableName(ns), Family: nftables.TableFamilyINet}
	var out []Refusal
	for _, name := range []string{setRefusedLocal, setRefusedRemote} {
		elems, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", name, tbl.Name, err)
		}
		for _, e := range elems {
			r, ok := refusalOf(ns, name, e)
			if ok {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// refusalOf decodes a refused set's element.
func refusalOf(ns, set string, e nftables.SetElement) (Refusal, bool) {
	k := e.Key
	r := Refusal{NS: ns}
	switch {
	case set == setRefusedLocal && len(k) == 12:
		r.Port = int(binary.BigEndian.Uint16(k[8:10]))
	case set == setRefusedRemote && len(k) == 16:
		r.Addr = netip.AddrFrom4([4]byte(k[8:12]))
		r.Port = int(binary.BigEndian.Uint16(k[12:14]))
	default:
		return r, false
	}
	r.Cgroup = binaryutil.NativeEndian.Uint64(k[:8])
	if e.Counter != nil {
		r.Count = e.Counter.Packets
	}
	return r, true
}

// ReachNamespaces lists the namespaces the firewall holds a reach table
// in, "" for the host's.
func (f *Firewall) ReachNamespaces() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ns := range slices.Sorted(maps.Keys(f.reach)) {
		if f.reach[ns] != nil {
			out = append(out, ns)
		}
	}
	return out
}
