package spec

// KindNetwork is the kind of a network document, beside workloads.
const KindNetwork = "network"

// Network is a network document: the settings of an isolated network. A
// network that has none gets the defaults.
type Network struct {
	Kind string `json:"kind"` // "network"
	Name string `json:"name"`
	// Project is the project the network belongs to (see Workload).
	Project string `json:"project,omitempty"`
	// Egress lets the network's traffic out through the host (source NAT);
	// false keeps everything beyond the network out of its reach, the host
	// included. Default true.
	Egress *bool `json:"egress,omitempty"`
	// Peers opens the network to callers other than root while
	// --peer-users limits them: they may put workloads in it beside
	// root's. Without it a caller other than root uses only networks that
	// hold its own workloads alone.
	Peers bool `json:"peers,omitempty"`
	// Reach is "declared" to have the network's endpoints admit only
	// their own workload and the workloads that use them; "off" (the
	// default) admits every process that reaches the port.
	Reach string `json:"reach,omitempty"`
}

func init() {
	RegisterDocKind(DocKind{Name: KindNetwork, Plural: "networks", Rank: 20, InDirectory: true,
		New: func() Document { return new(Network) }})
}

// DocKind is the network document's kind.
func (n *Network) DocKind() string { return KindNetwork }

// DocName is the network's name.
func (n *Network) DocName() string { return n.Name }

// CloneDocument is Clone as a Document.
func (n *Network) CloneDocument() Document { return n.Clone() }

// Reach settings of a network document.
const (
	ReachOff      = "off"
	ReachDeclared = "declared"
)

// AllowsEgress is Egress with its default.
func (n *Network) AllowsEgress() bool { return n == nil || n.Egress == nil || *n.Egress }

// DeclaredReach says whether the network is under declared reach.
func (n *Network) DeclaredReach() bool { return n != nil && n.Reach == ReachDeclared }

// Validate checks a network document.
func (n *Network) Validate() error {
	var p problems
	if n.Kind != KindNetwork {
		p.add("kind", "must be %q for a network document", KindNetwork)
	}
	if n.Name == NetworkHost || !validFull(n.Name) {
		p.add("name", "must be a network name of %s, not %q", nameRule, NetworkHost)
	}
	if n.Reach != "" && n.Reach != ReachOff && n.Reach != ReachDeclared {
		p.add("reach", "must be %q or %q, not %q", ReachDeclared, ReachOff, n.Reach)
	}
	validateDocProject(&p, n.Project, n.Name)
	return p.err()
}

// Clone is a copy of a network document.
func (n *Network) Clone() *Network {
	if n == nil {
		return nil
	}
	c := *n
	c.Egress = clonePtr(n.Egress)
	return &c
}

// SetProject is Workload.SetProject for a network document.
func (n *Network) SetProject(project string) error {
	return setProject(&n.Project, n.Name, project)
}

// Qualify makes a network document's name full.
func (n *Network) Qualify() {
	if n.Project == "" {
		n.Project = ProjectOf(n.Name)
	}
	n.Name = inProject(n.Project, n.Name)
}
