package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// Guard is what the policies ask of one network: in each direction they
// name, only what one of their allows lets through gets through. A nil
// direction is not guarded; an empty one lets nothing new through.
// Replies to connections already allowed always pass.
type Guard struct {
	Link    string // the host end of the network's veth
	Ingress *[]Allow
	Egress  *[]Allow
}

// Allow lets connections through to or from its peers at its ports.
type Allow struct {
	// Policy names the policy the allow comes from, in the rules'
	// comments, so that `nft list` tells whose rule a rule is.
	Policy string
	// Links are peer networks by their host links; CIDRs peer addresses.
	Links []string
	CIDRs []netip.Prefix
	// Ports, empty for every port and protocol.
	Ports []Port
}

// Port is a protocol (unix.IPPROTO_TCP, _UDP, _ICMP) and, but for ICMP,
// a destination port.
type Port struct {
	Proto uint8
	Port  int
}

// Reach is who may reach one endpoint's port, of a network (Link) or of
// the host's own (Link ""): the visibility of the endpoint. An internal
// one is reached from the host and every network, never from beyond the
// host; a private one from the host and the networks From only. Public
// endpoints need none.
type Reach struct {
	Link    string
	Port    int
	Private bool
	From    []string
}

// Projection is what the policies and the endpoints' visibilities ask
// of the networks and the host, put in force as one.
type Projection struct {
	Guards []Guard
	Reach  []Reach
}

// SetProjection puts p in force, unless it is in force already: the
// visibility sets' elements changed in place when only they differ, the
// table rewritten otherwise.
func (f *Firewall) SetProjection(p Projection) error {
	for _, g := range p.Guards {
		if !strings.HasPrefix(g.Link, LinkPrefix) {
			return fmt.Errorf("%w: a guard of link %q", errdefs.ErrInvalid, g.Link)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if reflect.DeepEqual(f.proj, p) {
		return nil // as written: most changes of a workload change none of it
	}
	// An apply changes a port or two of the visibilities: those elements
	// are changed in place, in one transaction, rather than the table
	// rewritten. Whatever that cannot do (the chains come or go, or the
	// table is not as written) rewrites the table.
	if !sameChains(f.proj, p) || f.changeReach(f.proj.Reach, p.Reach) != nil {
		if err := f.writeWith(f.nets, p); err != nil {
			return err
		}
	}
	f.proj = p
	return nil
}

// sameChains says whether the table written for a holds the chains and
// sets b needs, so that b differs from a in set elements at most.
func sameChains(a, b Projection) bool {
	return len(a.Reach) > 0 && len(b.Reach) > 0 && hostReach(a.Reach) == hostReach(b.Reach) && reflect.DeepEqual(a.Guards, b.Guards)
}

// changeReach turns the visibility sets' elements from those of old into
// those of new, in one transaction.
func (f *Firewall) changeReach(old, new []Reach) error {
	c, err := nftables.New(nftables.WithSockOptions(roomyWrites))
	if err != nil {
		return unavailable(err)
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: f.table, Family: nftables.TableFamilyIPv4}
	t6 := &nftables.Table{Name: f.table, Family: nftables.TableFamilyIPv6}
	gone, came := changedReach(old, new)
	oldNet, oldHost := reachElements(gone)
	newNet, newHost := reachElements(came)
	var errs []error
	change := func(t *nftables.Table, name string, before, after []nftables.SetElement) {
		st := &nftables.Set{Table: t, Name: name, Concatenation: true}
		gone, added := diffElements(before, after)
		if len(gone) > 0 {
			errs = append(errs, c.SetDeleteElements(st, gone))
		}
		if len(added) > 0 {
			errs = append(errs, c.SetAddElements(st, added))
		}
	}
	for chain, sets := range map[string][2]*reachSets{"reach": {&oldNet, &newNet}, "reach-host": {&oldHost, &newHost}} {
		before, after := sets[0], sets[1]
		change(t, chain+"-guarded", before.guarded, after.guarded)
		change(t, chain+"-internal", before.internal, after.internal)
		change(t, chain+"-from", before.from, after.from)
	}
	if hostReach(new) { // and old: sameChains
		change(t6, "reach-host-guarded", oldHost.guarded, newHost.guarded)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("change nftables table %s: %w", f.table, err)
	}
	return nil
}

// changedReach are the entries of old that new changes or drops, and
// those of new that are new or changed: their elements are all that
// differ, since every element names its entry's link and port.
func changedReach(old, new []Reach) (gone, came []Reach) {
	type key struct {
		link string
		port int
	}
	was := make(map[key]Reach, len(old))
	for _, r := range old {
		was[key{r.Link, r.Port}] = r
	}
	for _, r := range new {
		k := key{r.Link, r.Port}
		if o, ok := was[k]; ok && o.Private == r.Private && slices.Equal(o.From, r.From) {
			delete(was, k)
			continue
		}
		came = append(came, r)
	}
	for _, r := range old {
		if _, ok := was[key{r.Link, r.Port}]; ok {
			gone = append(gone, r)
		}
	}
	return gone, came
}

// diffElements are the elements of before not in after, and of after not
// in before.
func diffElements(before, after []nftables.SetElement) (gone, added []nftables.SetElement) {
	in := func(es []nftables.SetElement) map[string]bool {
		m := make(map[string]bool, len(es))
		for _, e := range es {
			m[string(e.Key)] = true
		}
		return m
	}
	was, is := in(before), in(after)
	for _, e := range before {
		if !is[string(e.Key)] {
			gone = append(gone, e)
		}
	}
	for _, e := range after {
		if !was[string(e.Key)] {
			added = append(added, e)
		}
	}
	return gone, added
}

// Guard chains run before the network chains and only ever refuse: what
// the baseline (networks apart, egress off) forbids, no policy opens.
// Each direction has a chain of its own, so that a connection from one
// guarded network to another passes the egress of the first and the
// ingress of the second.
var (
	guardInPriority  = nftables.ChainPriorityRef(-2)
	guardOutPriority = nftables.ChainPriorityRef(-1)
)

func buildGuards(c *nftables.Conn, t *nftables.Table, gs []Guard) {
	if len(gs) == 0 {
		return
	}
	accept := nftables.ChainPolicyAccept
	chain := func(name string, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		ch := c.AddChain(&nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: prio, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(replies(), verdict(expr.VerdictAccept)...)})
		return ch
	}
	in := chain("guard-ingress", nftables.ChainHookForward, guardInPriority)
	out := chain("guard-egress", nftables.ChainHookForward, guardOutPriority)
	host := chain("guard-egress-host", nftables.ChainHookInput, guardOutPriority)
	rule := func(ch *nftables.Chain, comment string, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all, UserData: userdata.AppendString(nil, userdata.TypeComment, comment)})
	}
	for _, g := range gs {
		if g.Ingress != nil {
			self := ifname(expr.MetaKeyOIFNAME, g.Link, false)
			for _, a := range *g.Ingress {
				for _, peer := range a.peers(expr.MetaKeyIIFNAME, 12) {
					for _, port := range a.ports() {
						rule(in, "policy "+a.Policy, self, peer, port, verdict(expr.VerdictAccept))
					}
				}
			}
			rule(in, "policies guard the ingress of "+g.Link, self, refuse())
		}
		if g.Egress != nil {
			self := ifname(expr.MetaKeyIIFNAME, g.Link, false)
			for _, a := range *g.Egress {
				for _, port := range a.ports() {
					for _, peer := range a.peers(expr.MetaKeyOIFNAME, 16) {
						rule(out, "policy "+a.Policy, self, peer, port, verdict(expr.VerdictAccept))
					}
					// The host's own addresses are reached through input:
					// only an address range can name them.
					for _, pre := range a.CIDRs {
						rule(host, "policy "+a.Policy, self, addrIn(16, pre), port, verdict(expr.VerdictAccept))
					}
				}
			}
			rule(out, "policies guard the egress of "+g.Link, self, refuse())
			rule(host, "policies guard the egress of "+g.Link, self, refuse())
		}
	}
}

// peers are the matches of an allow's peers: a link by key, an address
// range at offset (12 the source, 16 the destination).
func (a Allow) peers(key expr.MetaKey, offset uint32) [][]expr.Any {
	var out [][]expr.Any
	for _, l := range a.Links {
		out = append(out, ifname(key, l, false))
	}
	for _, pre := range a.CIDRs {
		out = append(out, addrIn(offset, pre))
	}
	return out
}

// ports are the matches of an allow's ports; one that matches all when
// it has none.
func (a Allow) ports() [][]expr.Any {
	if len(a.Ports) == 0 {
		return [][]expr.Any{nil}
	}
	out := make([][]expr.Any, len(a.Ports))
	for i, p := range a.Ports {
		out[i] = protoPort(p)
	}
	return out
}

func protoPort(p Port) []expr.Any {
	e := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p.Proto}},
	}
	if p.Proto == unix.IPPROTO_ICMP {
		return e
	}
	return append(e,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(p.Port >> 8), byte(p.Port)}},
	)
}

// reachPriority runs the visibility chains first of all: they too only
// refuse.
var reachPriority = nftables.ChainPriorityRef(-3)

// buildReach writes the endpoints' visibilities: a connection to a
// guarded port from anywhere but the host and the networks it allows is
// refused. The ports are elements of sets, not rules of their own, so
// that a packet costs a hash lookup per rule however many endpoints there
// are, and a table of thousands of them is one small message. Each chain
// has three sets, keyed "link . protocol . port" for the networks' ports
// (forward) and "protocol . port" for the host's (input); a key of more
// than one field keeps the kernel off its bitmap sets, whose writes cost
// 40 ms for 3,000 ports where a hash takes 3:
//
//	PREFIX-guarded   every internal and private port
//	PREFIX-internal  the internal ports: every network of the daemon's reaches them
//	PREFIX-from      KEY . iifname: the networks a private port admits
//
// The host reaches its own ports over loopback first.
func buildReach(c *nftables.Conn, t *nftables.Table, rs []Reach, links *nftables.Set) error {
	if len(rs) == 0 {
		return nil
	}
	net, host := reachElements(rs)
	// A concatenation starts at the first 32-bit register and each field
	// fills whole registers (an interface name four).
	netKey := slices.Concat([]expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: unix.NFT_REG32_00}}, protoPortTo(unix.NFT_REG32_00+4))
	if err := net.write(c, reachChain(c, t, "reach", nftables.ChainHookForward),
		nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeInetProto, nftables.TypeInetService), netKey, nil, links); err != nil {
		return err
	}
	return host.write(c, reachChain(c, t, "reach-host", nftables.ChainHookInput),
		hostKeyType, protoPortTo(unix.NFT_REG32_00), ifname(expr.MetaKeyIIFNAME, "lo", false), links)
}

// hostKeyType is the key of the sets of the host's ports.
var hostKeyType = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)

// protoPortTo loads a packet's "protocol . destination port" into the
// registers from reg on.
func protoPortTo(reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Payload{DestRegister: reg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

// tcpKey is a TCP port as the "protocol . port" fields of a key.
func tcpKey(port int) []byte {
	return []byte{unix.IPPROTO_TCP, 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// reachElements are the sets' elements of the networks' ports and of the
// host's.
func reachElements(rs []Reach) (net, host reachSets) {
	for _, r := range rs {
		if r.Link == "" {
			host.add(tcpKey(r.Port), r)
		} else {
			net.add(slices.Concat(ifnameKey(r.Link), tcpKey(r.Port)), r)
		}
	}
	return net, host
}

// reachChain adds a visibility chain that lets replies through.
func reachChain(c *nftables.Conn, t *nftables.Table, name string, hook *nftables.ChainHook) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: reachPriority, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(replies(), verdict(expr.VerdictAccept)...)})
	return ch
}

// reachSets are the elements of one visibility chain's sets.
type reachSets struct {
	guarded, internal, from []nftables.SetElement
}

// add puts r's port, keyed k, in the sets.
func (s *reachSets) add(k []byte, r Reach) {
	s.guarded = append(s.guarded, nftables.SetElement{Key: k})
	if !r.Private {
		s.internal = append(s.internal, nftables.SetElement{Key: k})
		return
	}
	for _, l := range r.From {
		s.from = append(s.from, nftables.SetElement{Key: slices.Concat(k, ifnameKey(l))})
	}
}

// write adds ch's sets, of keyType, and its rules over them; key loads a
// packet's key into the registers. lo, when not nil, matches what is
// accepted at a guarded port before anything else; links are the daemon's
// own, which reach its internal ports.
func (s *reachSets) write(c *nftables.Conn, ch *nftables.Chain, keyType nftables.SetDatatype, key, lo []expr.Any, links *nftables.Set) error {
	fromType := nftables.MustConcatSetType(append(nftables.ConcatSetTypeElements(keyType), nftables.TypeIFName)...)
	set := func(name string, kt nftables.SetDatatype, elems []nftables.SetElement) (*nftables.Set, error) {
		st := &nftables.Set{Table: ch.Table, Name: ch.Name + "-" + name, KeyType: kt, Concatenation: true}
		if err := c.AddSet(st, elems); err != nil {
			return nil, fmt.Errorf("nftables set %s: %w", st.Name, err)
		}
		return st, nil
	}
	guarded, err := set("guarded", keyType, s.guarded)
	if err != nil {
		return err
	}
	internal, err := set("internal", keyType, s.internal)
	if err != nil {
		return err
	}
	from, err := set("from", fromType, s.from)
	if err != nil {
		return err
	}
	// The input link follows the key, in the register after its last.
	iif := &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: unix.NFT_REG32_00 + keyType.Bytes/4}
	in := func(st *nftables.Set, more ...expr.Any) []expr.Any {
		return slices.Concat(key, more, []expr.Any{&expr.Lookup{SourceRegister: unix.NFT_REG32_00, SetName: st.Name, SetID: st.ID}})
	}
	rule := func(exprs ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: slices.Concat(exprs...)})
	}
	if lo != nil {
		rule(in(guarded), lo, verdict(expr.VerdictAccept))
	}
	rule(in(from, iif), verdict(expr.VerdictAccept))
	rule(in(internal), inSet(expr.MetaKeyIIFNAME, links), verdict(expr.VerdictAccept))
	rule(in(guarded), refuse())
	return nil
}

// buildReach6 guards the host's own internal and private ports on IPv6,
// where no network of flyd's is: the host reaches them over loopback,
// nothing else does (refused with a TCP reset, which every family has).
func buildReach6(c *nftables.Conn, t *nftables.Table, rs []Reach) error {
	ch := reachChain(c, t, "reach-host", nftables.ChainHookInput)
	_, host := reachElements(rs)
	guarded := &nftables.Set{Table: t, Name: "reach-host-guarded", KeyType: hostKeyType, Concatenation: true}
	if err := c.AddSet(guarded, host.guarded); err != nil {
		return fmt.Errorf("nftables set %s: %w", guarded.Name, err)
	}
	in := append(protoPortTo(unix.NFT_REG32_00), &expr.Lookup{SourceRegister: unix.NFT_REG32_00, SetName: guarded.Name, SetID: guarded.ID})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(in, ifname(expr.MetaKeyIIFNAME, "lo", false), verdict(expr.VerdictAccept))})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(in, []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})})
	return nil
}

// hostReach says whether rs guards a port of the host's own.
func hostReach(rs []Reach) bool {
	return slices.ContainsFunc(rs, func(r Reach) bool { return r.Link == "" })
}
