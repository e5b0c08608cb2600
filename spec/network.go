package spec

import (
	"fmt"
	"slices"
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

// docKind is a document's kind key, "" when it has none (a workload's
// kind says its runtime, never a document kind's name).
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

// Documents is what a spec file holds: workloads, and the documents of
// the other kinds (DocKinds) in the order it holds them.
type Documents struct {
	Workloads []*Workload
	Docs      []Document
}

// Add appends o's documents of every kind to d's: where files are read
// together, a kind is never left out.
func (d *Documents) Add(o *Documents) {
	d.Workloads = append(d.Workloads, o.Workloads...)
	d.Docs = append(d.Docs, o.Docs...)
}

// SetProject puts every document of d in project (SetProject of each),
// or says which states another.
func (d *Documents) SetProject(project string) error {
	for _, w := range d.Workloads {
		if err := w.SetProject(project); err != nil {
			return err
		}
	}
	for _, doc := range d.Docs {
		if err := doc.SetProject(project); err != nil {
			return fmt.Errorf("%s %s: %w", doc.DocKind(), doc.DocName(), err)
		}
	}
	return nil
}

// ParseAll reads workloads and the documents of every kind alike, with
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
			kind := docKind(doc)
			if k, ok := DocKindOf(kind); ok {
				dd, err := buildDoc(k, doc)
				if err == nil {
					err = once(doc, k.Name, dd.DocName())
				}
				if err != nil {
					return nil, err
				}
				d.Docs = append(d.Docs, dd)
				continue
			}
			if kind != "" && !slices.Contains(Kinds, Kind(kind)) {
				return nil, atLine(doc.lineOf("kind"), fieldErrorf("kind", "%q is neither a workload's runtime (%s, %s, %s or %s) nor a document's kind (%s)",
					kind, KindNative, KindNix, KindContainerd, KindExternal, docKindNames()))
			}
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
	if len(d.Workloads)+len(d.Docs) == 0 {
		return nil, fmt.Errorf("no workload nor document (%s) found", docKindNames())
	}
	return d, nil
}
