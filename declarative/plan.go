package declarative

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// ErrDuplicateName is wrapped by the problem reported for each file when two
// files define the same workload name (or network, or policy). It is an
// errdefs.ErrConflict.
var ErrDuplicateName = fmt.Errorf("%w: a name may be defined in one file only", errdefs.ErrConflict)

// doc is a document a file may hold: a *spec.Workload, or a
// spec.Document of a kind the directory takes. (A union cannot name an
// interface with methods; both are comparable, to their zero value.)
type doc interface{ comparable }

// kind is what the plan needs to know of one kind of document.
type kind[D doc] struct {
	what  string // "workload", or the document kind's name
	of    func(f fileState) []D
	name  func(D) string
	equal func(a, b D) bool
}

var workloads = kind[*spec.Workload]{what: "workload", of: func(f fileState) []*spec.Workload { return f.ws },
	name: func(w *spec.Workload) string { return w.Name }, equal: spec.Equal}

// docsOf is the plan's view of a kind of document the directory takes.
func docsOf(k spec.DocKind) kind[spec.Document] {
	return kind[spec.Document]{what: k.Name,
		of: func(f fileState) []spec.Document {
			var out []spec.Document
			for _, d := range f.docs {
				if d.DocKind() == k.Name {
					out = append(out, d)
				}
			}
			return out
		},
		name:  func(d spec.Document) string { return d.DocName() },
		equal: func(a, b spec.Document) bool { return reflect.DeepEqual(a, b) }}
}

// directoryKinds are the kinds of documents the directory takes, in rank
// order.
func directoryKinds() []spec.DocKind {
	var out []spec.DocKind
	for _, k := range spec.DocKinds() {
		if k.InDirectory {
			out = append(out, k)
		}
	}
	return out
}

// applied is what the watcher last put for a name.
type applied[D doc] struct {
	owner string
	// spec is nil when the applier's copy is unknown: adopted from the
	// applier at start, or after a failed put that may have half-happened.
	// It is then put again, which the applier makes a no-op when nothing
	// changed.
	spec D
}

type putAction[D doc] struct {
	w     D
	owner string
}

type deleteAction struct {
	name, owner string
}

// plan is the difference between the files and what is applied, for one
// kind of document.
type plan[D doc] struct {
	puts     []putAction[D] // sorted by name
	deletes  []deleteAction // sorted by name
	problems map[string][]error
}

// claim is one file's interest in a name. w is nil for a bad file: it holds
// on to its names without a document to put.
type claim[D doc] struct {
	file string
	w    D
}

// makePlan decides the puts and deletes of workloads that bring cur to what
// files define (planKind for workloads), with each bad file's problem: it
// is said once, here, whatever kinds of documents the file holds.
func makePlan(files []fileState, lastGood map[string]fileState, cur map[string]applied[*spec.Workload]) plan[*spec.Workload] {
	p := planKind(workloads, files, lastGood, cur)
	for _, f := range files {
		if f.err != nil {
			p.problems[f.name] = append([]error{f.err}, p.problems[f.name]...)
		}
	}
	return p
}

// planKind decides the puts and deletes that bring cur to what files define.
// A bad file claims the names of its last good parse and the names it owns
// now, so that its documents are neither deleted nor taken by another file
// while it is broken. It does not change its arguments.
func planKind[D doc](k kind[D], files []fileState, lastGood map[string]fileState, cur map[string]applied[D]) plan[D] {
	p := plan[D]{problems: make(map[string][]error)}
	claims := make(map[string][]claim[D])
	for _, f := range files {
		if f.err == nil {
			for _, w := range k.of(f) {
				claims[k.name(w)] = append(claims[k.name(w)], claim[D]{f.name, w})
			}
			continue
		}
		held := make(map[string]bool)
		for _, w := range k.of(lastGood[f.name]) {
			held[k.name(w)] = true
		}
		for name, a := range cur {
			if a.owner == f.name {
				held[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(held)) {
			claims[name] = append(claims[name], claim[D]{file: f.name})
		}
	}

	for _, name := range slices.Sorted(maps.Keys(claims)) {
		cs := claims[name]
		if len(cs) > 1 {
			err := duplicateError(k.what, name, cs)
			for _, c := range cs {
				p.problems[c.file] = append(p.problems[c.file], err)
			}
			continue
		}
		c := cs[0]
		var none D
		if c.w == none {
			continue
		}
		a, ok := cur[name]
		if ok && a.owner == c.file && a.spec != none && k.equal(a.spec, c.w) {
			continue
		}
		if ok && a.owner != c.file {
			// The applier lets only a document's owner change it, so one
			// moving to another file is deleted, then created.
			p.deletes = append(p.deletes, deleteAction{name: name, owner: a.owner})
		}
		p.puts = append(p.puts, putAction[D]{w: c.w, owner: c.file})
	}

	for name, a := range cur {
		if _, ok := claims[name]; !ok {
			p.deletes = append(p.deletes, deleteAction{name: name, owner: a.owner})
		}
	}
	slices.SortFunc(p.deletes, func(a, b deleteAction) int { return strings.Compare(a.name, b.name) })
	return p
}

func duplicateError[D doc](what, name string, cs []claim[D]) error {
	files := make([]string, len(cs))
	for i, c := range cs {
		files[i] = c.file
	}
	return fmt.Errorf("%s %q is defined in %s: %w", what, name, strings.Join(files, " and "), ErrDuplicateName)
}
