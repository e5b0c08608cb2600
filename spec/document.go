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
