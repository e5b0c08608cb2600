package firewall

import (
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

// SetProjection replaces the projection and rewrites the table, unless
// it is the one in force.
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
	if err := f.writeWith(f.nets, p); err != nil {
		return err
	}
	f.proj = p
	return nil
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
// refused.
func buildReach(c *nftables.Conn, t *nftables.Table, rs []Reach) {
	if len(rs) == 0 {
		return
	}
	accept := nftables.ChainPolicyAccept
	chain := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		ch := c.AddChain(&nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: reachPriority, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(replies(), verdict(expr.VerdictAccept)...)})
		return ch
	}
	forward := chain("reach", nftables.ChainHookForward)
	host := chain("reach-host", nftables.ChainHookInput)
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	for _, r := range rs {
		port := protoPort(Port{Proto: unix.IPPROTO_TCP, Port: r.Port})
		ch, self := forward, ifname(expr.MetaKeyOIFNAME, orPrefix(r.Link), false)
		if r.Link == "" {
			// The host's own port: the host reaches it over loopback.
			ch, self = host, nil
			rule(ch, port, ifname(expr.MetaKeyIIFNAME, "lo", false), verdict(expr.VerdictAccept))
		}
		if r.Private {
			for _, from := range r.From {
				rule(ch, self, port, ifname(expr.MetaKeyIIFNAME, from, false), verdict(expr.VerdictAccept))
			}
		} else {
			rule(ch, self, port, ifname(expr.MetaKeyIIFNAME, LinkPrefix, false), verdict(expr.VerdictAccept))
		}
		rule(ch, self, port, refuse())
	}
}

// orPrefix is a link's name, never empty.
func orPrefix(link string) string {
	if link == "" {
		return LinkPrefix
	}
	return link
}

func hostReach(rs []Reach) bool {
	for _, r := range rs {
		if r.Link == "" {
			return true
		}
	}
	return false
}

// buildReach6 guards the host's own internal and private ports on IPv6,
// where no network of flyd's is: the host reaches them over loopback,
// nothing else does (refused with a TCP reset, which every family has).
func buildReach6(c *nftables.Conn, t *nftables.Table, rs []Reach) {
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: "reach-host", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: reachPriority, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(replies(), verdict(expr.VerdictAccept)...)})
	for _, r := range rs {
		if r.Link != "" {
			continue
		}
		port := protoPort(Port{Proto: unix.IPPROTO_TCP, Port: r.Port})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(port, ifname(expr.MetaKeyIIFNAME, "lo", false), verdict(expr.VerdictAccept))})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(port, []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})})
	}
}
