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
	// Egress lets the network's traffic out through the host (source NAT);
	// false keeps everything beyond the network out of its reach, the host
	// included. Default true.
	Egress *bool `json:"egress,omitempty"`
}

// AllowsEgress is Egress with its default.
func (n *Network) AllowsEgress() bool { return n == nil || n.Egress == nil || *n.Egress }

// Validate checks a network document.
func (n *Network) Validate() error {
	var p problems
	if n.Kind != KindNetwork {
		p.add("kind", "must be %q for a network document", KindNetwork)
	}
	if n.Name == NetworkHost || !validName(n.Name) {
		p.add("name", "must be a network name of %s, not %q", nameRule, NetworkHost)
	}
	return p.err()
}

// isNetworkDoc says whether a document is a network document.
func isNetworkDoc(doc *node) bool {
	if doc.kind != mapNode {
		return false
	}
	for i, k := range doc.keys {
		if k.text == "kind" {
			return doc.vals[i].kind == stringNode && doc.vals[i].text == KindNetwork
		}
	}
	return false
}

// buildNetwork decodes and validates a network document, as strictly as a
// workload.
func buildNetwork(doc *node) (*Network, error) {
	n := new(Network)
	if err := decodeValue(doc, reflect.ValueOf(n).Elem(), ""); err != nil {
		return nil, err
	}
	if err := n.Validate(); err != nil {
		if fe, ok := err.(*FieldError); ok {
			return nil, atLine(doc.lineOf(fe.Field), fe)
		}
		return nil, err
	}
	return n, nil
}

// Documents is what a spec file holds: workloads and network documents.
type Documents struct {
	Workloads []*Workload
	Networks  []*Network
}

// ParseAll reads workloads and network documents alike, with the same
// strictness as Parse.
func ParseAll(data []byte) (*Documents, error) {
	roots, err := readDocuments(data)
	if err != nil {
		return nil, err
	}
	d := &Documents{}
	workloads, networks := map[string]bool{}, map[string]bool{}
	for _, root := range roots {
		docs := []*node{root}
		if root.kind == listNode {
			docs = root.items
		}
		for _, doc := range docs {
			if isNetworkDoc(doc) {
				n, err := buildNetwork(doc)
				if err != nil {
					return nil, err
				}
				if networks[n.Name] {
					return nil, atLine(doc.lineOf("name"), fieldErrorf("name", "network %q is defined more than once", n.Name))
				}
				networks[n.Name] = true
				d.Networks = append(d.Networks, n)
				continue
			}
			w, err := build(doc)
			if err != nil {
				return nil, err
			}
			if workloads[w.Name] {
				return nil, atLine(doc.lineOf("name"), fieldErrorf("name", "workload %q is defined more than once", w.Name))
			}
			workloads[w.Name] = true
			d.Workloads = append(d.Workloads, w)
		}
	}
	if len(d.Workloads) == 0 && len(d.Networks) == 0 {
		return nil, fmt.Errorf("no workload or network found")
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
	return buildNetwork(root)
}
