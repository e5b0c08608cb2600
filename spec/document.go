package spec

import (
	"cmp"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Document is a document of a kind beside workloads (a network, a policy,
// a workspace): what every part that carries documents without knowing
// their kind (the parser, the API, projects, the workloads directory)
// asks of one.
type Document interface {
	// DocKind is the document's kind key, DocName its name as written
	// (bare, or full once qualified).
	DocKind() string
	DocName() string
	// Validate checks the document as its kind requires.
	Validate() error
	// SetProject puts a document read for a project in it; one that
	// states another project is refused.
	SetProject(project string) error
	// Qualify makes a valid document's names full (see Workload.Qualify).
	Qualify()
	// CloneDocument is a deep copy.
	CloneDocument() Document
}

// DocKind is one kind of document beside workloads, as its file registers
// it: everything that carries documents finds the kinds here.
type DocKind struct {
	// Name is the value of the documents' `kind` key: "network".
	Name string
	// Plural names the kind in the API's route (/v1/PLURAL), in a
	// project's documents and ProjectChange (JSON key), and as the CLI's
	// command: "networks".
	Plural string
	// New is an empty document of the kind, to decode into.
	New func() Document
	// Rank orders the kinds' documents as they are put in force: lower
	// first, every kind before the workloads; they are removed in the
	// reverse order, after the workloads.
	Rank int
	// InDirectory says whether the workloads directory takes the kind;
	// a file of it that holds a document of a kind it does not take is
	// refused whole, never applied without it.
	InDirectory bool
}

// docKinds is the table of document kinds; mu guards byName and sorted.
var docKinds struct {
	mu     sync.Mutex
	byName map[string]DocKind
	sorted []DocKind
}

// RegisterDocKind adds a kind of document to the table; a kind's own file
// registers it from init. A name or plural taken twice, or a workload
// runtime's name, is a programming error.
func RegisterDocKind(k DocKind) {
	docKinds.mu.Lock()
	defer docKinds.mu.Unlock()
	if k.Name == "" || k.Plural == "" || k.New == nil {
		panic("spec: a document kind needs a name, a plural and New")
	}
	if slices.Contains(Kinds, Kind(k.Name)) {
		panic("spec: document kind " + k.Name + " is a workload's runtime")
	}
	for _, o := range docKinds.byName {
		if o.Name == k.Name || o.Plural == k.Plural || o.Name == k.Plural || o.Plural == k.Name {
			panic("spec: document kind " + k.Name + " registered twice")
		}
	}
	if docKinds.byName == nil {
		docKinds.byName = map[string]DocKind{}
	}
	docKinds.byName[k.Name] = k
	docKinds.sorted = append(docKinds.sorted, k)
	slices.SortFunc(docKinds.sorted, func(a, b DocKind) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Name, b.Name))
	})
}

// DocKinds is every kind of document beside workloads, in rank order.
func DocKinds() []DocKind {
	docKinds.mu.Lock()
	defer docKinds.mu.Unlock()
	return slices.Clone(docKinds.sorted)
}

// DocKindOf is the kind of document named name ("network"), if any.
func DocKindOf(name string) (DocKind, bool) {
	docKinds.mu.Lock()
	defer docKinds.mu.Unlock()
	k, ok := docKinds.byName[name]
	return k, ok
}

// docKindNames lists the kinds' names, for messages.
func docKindNames() string {
	var names []string
	for _, k := range DocKinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// DocsOf is the documents of docs that are of type T, in their order: for
// a caller that needs one kind's.
func DocsOf[T Document](docs []Document) []T {
	var out []T
	for _, d := range docs {
		if t, ok := d.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Qualified is a copy of a valid document with its full names, for the
// parts that keep documents by full name.
func Qualified(d Document) (Document, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	c := d.CloneDocument()
	c.Qualify()
	return c, nil
}

// buildDoc decodes and validates a document of kind k, as strictly as a
// workload.
func buildDoc(k DocKind, doc *node) (Document, error) {
	d := k.New()
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

// DecodeDocumentJSON reads one document of the kind named kind as a JSON
// object, as strictly as DecodeJSON reads a workload.
func DecodeDocumentJSON(kind string, r io.Reader) (Document, error) {
	k, ok := DocKindOf(kind)
	if !ok {
		return nil, fmt.Errorf("no document kind %q (kinds: %s)", kind, docKindNames())
	}
	root, err := readOneJSON(r)
	if err != nil {
		return nil, err
	}
	return buildDoc(k, root)
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
	return ParseAllIn(data, "", expand)
}

// ParseAllIn is ParseAllExpanded of a spec file in directory dir (absolute),
// which a host workload's paths are relative to: its workdir is dir when
// it says none, and a relative one is resolved against dir, as compose and
// process-compose resolve them against the file. An empty dir (the API's
// specs: there is no file) leaves them as they are.
func ParseAllIn(data []byte, dir string, expand Expander) (*Documents, error) {
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
				return nil, atLine(doc.lineOf("kind"), fieldErrorf("kind", "%q is neither a workload's runtime (%s) nor a document's kind (%s)",
					kind, kindsWhere(func(Runtime) bool { return true }, "or"), docKindNames()))
			}
			w, err := build(doc, dir)
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
