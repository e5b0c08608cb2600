package spec

import (
	"net/netip"
	"slices"
)

// KindPolicy is the kind of a policy document: an allow-list firewall
// for the workloads it selects.
const KindPolicy = "policy"

// Policies are put in force after networks, before the workloads they
// govern run.
func init() {
	RegisterDocKind(DocKind{Name: KindPolicy, Plural: "policies", Rank: 30, InDirectory: true,
		New: func() Document { return new(Policy) }})
}

// DocKind is the policy's kind.
func (pl *Policy) DocKind() string { return KindPolicy }

// DocName is the policy's name.
func (pl *Policy) DocName() string { return pl.Name }

// CloneDocument is Clone as a Document.
func (pl *Policy) CloneDocument() Document { return pl.Clone() }

// Policy says who may reach the workloads it selects, and what they may
// reach. A direction the policy names (ingress, egress) is denied to the
// selected workloads but for what its rules allow, an empty list denying
// all of it; a direction it leaves out it says nothing of. Several
// policies selecting one workload add up: what any of them allows is
// allowed.
//
// On one host the unit a policy governs is an isolated network: the
// workloads of one network share its namespace and address.
type Policy struct {
	Kind string `json:"kind"` // "policy"
	Name string `json:"name"`
	// Project is the project the policy belongs to (see Workload).
	Project string   `json:"project,omitempty"`
	Select  Selector `json:"select"`
	// Ingress is what may reach the selected workloads; nil leaves
	// ingress alone.
	Ingress *[]IngressRule `json:"ingress,omitempty"`
	// Egress is what the selected workloads may reach; nil leaves egress
	// alone.
	Egress *[]EgressRule `json:"egress,omitempty"`
}

// Selector names workloads: those named, and those of the networks named.
type Selector struct {
	Workloads []string `json:"workloads,omitempty"`
	Networks  []string `json:"networks,omitempty"`
}

// IngressRule allows connections from its peers to its ports.
type IngressRule struct {
	From  Peers        `json:"from"`
	Ports []PolicyPort `json:"ports,omitempty"`
}

// EgressRule allows connections to its peers at its ports.
type EgressRule struct {
	To    Peers        `json:"to"`
	Ports []PolicyPort `json:"ports,omitempty"`
}

// Peers are the other end of a rule: workloads (by name, through their
// network), networks, and address ranges.
type Peers struct {
	Workloads []string `json:"workloads,omitempty"`
	Networks  []string `json:"networks,omitempty"`
	CIDRs     []string `json:"cidrs,omitempty"`
	// Users, in an ingress rule, are the workloads whose `uses` name a
	// selected workload: who reaches it follows from the declared
	// dependencies, at its endpoints' ports unless the rule names ports.
	Users bool `json:"users,omitempty"`
	// Peers, beside Users, counts among them the workloads that callers
	// other than root applied: without it a `uses` of theirs opens
	// nothing of what root applied.
	Peers bool `json:"peers,omitempty"`
	// DNS names cannot be enforced by a packet filter without a resolver
	// of its own in the path; a rule naming any is refused, saying so.
	DNS []string `json:"dns,omitempty"`
}

// PolicyPort is a port and its protocol (tcp unless said); icmp takes no
// port. A rule without ports allows every port and protocol.
type PolicyPort struct {
	Port     int    `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`
}

// Protocols a policy port may name.
const (
	ProtocolTCP  = "tcp"
	ProtocolUDP  = "udp"
	ProtocolICMP = "icmp"
)

// Proto is the port's protocol with its default.
func (p PolicyPort) Proto() string {
	if p.Protocol == "" {
		return ProtocolTCP
	}
	return p.Protocol
}

// Validate checks a policy document, naming the field of each problem.
func (pl *Policy) Validate() error {
	var p problems
	if pl.Kind != KindPolicy {
		p.add("kind", "must be %q for a policy document", KindPolicy)
	}
	if !validFull(pl.Name) {
		p.add("name", "must be %s", nameRule)
	}
	validateDocProject(&p, pl.Project, pl.Name)
	if len(pl.Select.Workloads)+len(pl.Select.Networks) == 0 {
		p.add("select", "must name workloads or networks: a policy that selects nothing governs nothing")
	}
	validNames(&p, "select.workloads", pl.Select.Workloads)
	validNames(&p, "select.networks", pl.Select.Networks)
	if pl.Ingress != nil {
		for i, r := range *pl.Ingress {
			at := indexPath("ingress", i)
			r.From.validate(&p, joinPath(at, "from"))
			validPorts(&p, joinPath(at, "ports"), r.Ports)
		}
	}
	if pl.Egress != nil {
		for i, r := range *pl.Egress {
			at := indexPath("egress", i)
			r.To.validate(&p, joinPath(at, "to"))
			if r.To.Users {
				p.add(joinPath(at, "to.users"), "is for ingress: the users of a workload reach it, not the other way")
			}
			validPorts(&p, joinPath(at, "ports"), r.Ports)
		}
	}
	return p.err()
}

func validNames(p *problems, field string, names []string) {
	for i, n := range names {
		if !validFull(n) || n == NetworkHost {
			p.add(indexPath(field, i), "must be a name of %s, not %q", nameRule, n)
		}
	}
}

func (ps Peers) validate(p *problems, field string) {
	if len(ps.DNS) > 0 {
		p.add(joinPath(field, "dns"), "is not enforced: a packet filter sees addresses, not names; list the addresses as cidrs")
	}
	if len(ps.Workloads)+len(ps.Networks)+len(ps.CIDRs) == 0 && len(ps.DNS) == 0 && !ps.Users {
		p.add(field, "must name workloads, networks, cidrs (0.0.0.0/0 for anywhere) or users")
	}
	validNames(p, joinPath(field, "workloads"), ps.Workloads)
	validNames(p, joinPath(field, "networks"), ps.Networks)
	for i, c := range ps.CIDRs {
		pre, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			p.add(indexPath(joinPath(field, "cidrs"), i), "%q is not a CIDR such as 10.0.0.0/8", c)
		case !pre.Addr().Is4():
			p.add(indexPath(joinPath(field, "cidrs"), i), "%q is IPv6: flyd's networks and their rules are IPv4", c)
		case pre.Masked() != pre:
			p.add(indexPath(joinPath(field, "cidrs"), i), "%q has bits set past its length; did you mean %s?", c, pre.Masked())
		}
	}
}

func validPorts(p *problems, field string, ports []PolicyPort) {
	for i, pp := range ports {
		at := indexPath(field, i)
		switch pp.Proto() {
		case ProtocolTCP, ProtocolUDP:
			if pp.Port < 1 || pp.Port > 65535 {
				p.add(joinPath(at, "port"), "must be 1 to 65535, not %d", pp.Port)
			}
		case ProtocolICMP:
			if pp.Port != 0 {
				p.add(joinPath(at, "port"), "icmp has no ports")
			}
		default:
			p.add(joinPath(at, "protocol"), "must be tcp, udp or icmp, not %q", pp.Protocol)
		}
	}
}

// Clone is a deep copy of a policy.
func (pl *Policy) Clone() *Policy {
	if pl == nil {
		return nil
	}
	c := *pl
	c.Select = Selector{Workloads: slices.Clone(pl.Select.Workloads), Networks: slices.Clone(pl.Select.Networks)}
	peers := func(p Peers) Peers {
		p.Workloads, p.Networks = slices.Clone(p.Workloads), slices.Clone(p.Networks)
		p.CIDRs, p.DNS = slices.Clone(p.CIDRs), slices.Clone(p.DNS)
		return p
	}
	if pl.Ingress != nil {
		in := make([]IngressRule, len(*pl.Ingress))
		for i, r := range *pl.Ingress {
			in[i] = IngressRule{From: peers(r.From), Ports: slices.Clone(r.Ports)}
		}
		c.Ingress = &in
	}
	if pl.Egress != nil {
		out := make([]EgressRule, len(*pl.Egress))
		for i, r := range *pl.Egress {
			out[i] = EgressRule{To: peers(r.To), Ports: slices.Clone(r.Ports)}
		}
		c.Egress = &out
	}
	return &c
}

// SetProject is Workload.SetProject for a policy document.
func (pl *Policy) SetProject(project string) error {
	return setProject(&pl.Project, pl.Name, project)
}

// Qualify makes a policy's names full: its own, and the bare names of
// workloads and networks it selects and allows, which are its project's. A
// full name stays: a policy may name another project's networks.
func (pl *Policy) Qualify() {
	if pl.Project == "" {
		pl.Project = ProjectOf(pl.Name)
	}
	project := pl.Project
	if project == "" {
		return
	}
	pl.Name = inProject(project, pl.Name)
	all := func(names []string) {
		for i, n := range names {
			names[i] = inProject(project, n)
		}
	}
	all(pl.Select.Workloads)
	all(pl.Select.Networks)
	if pl.Ingress != nil {
		for _, r := range *pl.Ingress {
			all(r.From.Workloads)
			all(r.From.Networks)
		}
	}
	if pl.Egress != nil {
		for _, r := range *pl.Egress {
			all(r.To.Workloads)
			all(r.To.Networks)
		}
	}
}
