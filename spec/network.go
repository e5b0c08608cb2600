package spec

import (
	"fmt"
	"io"
	"reflect"
)

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

// docKind is a document's kind key, "" when it has none (a workload's
// kind says its runtime, never "network" or "policy").
func docKind(doc *node) string {
	if doc.kind != mapNode {
		return ""
	}
	for i, k := range doc.keys {
		if k.text == "kind" && doc.vals[i].kind == stringNode {
			return doc.vals[i].text
		}
	}
	return ""
}

// buildDoc decodes and validates a document of a kind beside workloads
// (a network, a policy), as strictly as a workload.
func buildDoc[T any, P interface {
	*T
	Validate() error
}](doc *node) (P, error) {
	d := P(new(T))
	if err := decodeValue(doc, reflect.ValueOf(d).Elem(), ""); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		if fe, ok := err.(*FieldError); ok {
			return nil, atLine(doc.lineOf(fe.Field), fe)
		}
		return nil, err
	}
	return d, nil
}

// Documents is what a spec file holds: workloads, network documents and
// policies.
type Documents struct {
	Workloads  []*Workload
	Networks   []*Network
	Policies   []*Policy
	Workspaces []*Workspace
}

// Add appends o's documents of every kind to d's: where files are read
// together, a kind is never left out.
func (d *Documents) Add(o *Documents) {
	d.Workloads = append(d.Workloads, o.Workloads...)
	d.Networks = append(d.Networks, o.Networks...)
	d.Policies = append(d.Policies, o.Policies...)
	d.Workspaces = append(d.Workspaces, o.Workspaces...)
}

// ParseAll reads workloads, network documents and policies alike, with
// the same strictness as Parse.
func ParseAll(data []byte) (*Documents, error) {
	return ParseAllExpanded(data, nil)
}

// ParseAllExpanded is ParseAll with every string value of every document
// (never a mapping key) given to expand before it is decoded, and decoded
// as what expand returns; see Expander. A nil expand changes nothing.
func ParseAllExpanded(data []byte, expand Expander) (*Documents, error) {
	roots, err := readDocuments(data)
	if err != nil {
		return nil, err
	}
	d := &Documents{}
	seen := map[string]map[string]bool{}
	once := func(doc *node, what, name string) error {
		if seen[what] == nil {
			seen[what] = map[string]bool{}
		}
		if seen[what][name] {
			return atLine(doc.lineOf("name"), fieldErrorf("name", "%s %q is defined more than once", what, name))
		}
		seen[what][name] = true
		return nil
	}
	for _, root := range roots {
		docs := []*node{root}
		if root.kind == listNode {
			docs = root.items
		}
		for _, doc := range docs {
			if expand != nil {
				if err := expandValues(doc, "", expand); err != nil {
					return nil, err
				}
			}
			switch docKind(doc) {
			case KindNetwork:
				n, err := buildDoc[Network](doc)
				if err == nil {
					err = once(doc, "network", n.Name)
				}
				if err != nil {
					return nil, err
				}
				d.Networks = append(d.Networks, n)
			case KindPolicy:
				pl, err := buildDoc[Policy](doc)
				if err == nil {
					err = once(doc, "policy", pl.Name)
				}
				if err != nil {
					return nil, err
				}
				d.Policies = append(d.Policies, pl)
			case KindWorkspace:
				ws, err := buildDoc[Workspace](doc)
				if err == nil {
					err = once(doc, "workspace", ws.Name)
				}
				if err != nil {
					return nil, err
				}
				d.Workspaces = append(d.Workspaces, ws)
			default:
				w, err := build(doc)
				if err == nil {
					err = once(doc, "workload", w.Name)
				}
				if err != nil {
					return nil, err
				}
				d.Workloads = append(d.Workloads, w)
			}
		}
	}
	if len(d.Workloads)+len(d.Networks)+len(d.Policies)+len(d.Workspaces) == 0 {
		return nil, fmt.Errorf("no workload, network, policy or workspace found")
	}
	return d, nil
}

// DecodeNetworkJSON reads one network document as a JSON object, as
// strictly as DecodeJSON reads a workload.
func DecodeNetworkJSON(r io.Reader) (*Network, error) {
	root, err := readOneJSON(r)
	if err != nil {
		return nil, err
	}
	return buildDoc[Network](root)
}
