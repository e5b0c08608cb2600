package declarative

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// ErrDuplicateName is wrapped by the problem reported for each file when two
// files define the same workload name. It is an errdefs.ErrConflict.
var ErrDuplicateName = fmt.Errorf("%w: a workload name may be defined in one file only", errdefs.ErrConflict)

// applied is what the watcher last put for a workload name.
type applied struct {
	owner string
	// spec is nil when the applier's copy is unknown: adopted from Owned at
	// start, or after a failed put that may have half-happened. It is then
	// put again, which the applier makes a no-op when nothing changed.
	spec *spec.Workload
}

type putAction struct {
	w     *spec.Workload
	owner string
}

type deleteAction struct {
	name, owner string
}

// plan is the difference between the files and what is applied.
type plan struct {
	puts     []putAction    // sorted by name
	deletes  []deleteAction // sorted by name
	problems map[string][]error
}

// claim is one file's interest in a workload name. w is nil for a bad file:
// it holds on to its names without a spec to put.
type claim struct {
	file string
	w    *spec.Workload
}

// makePlan decides the puts and deletes that bring cur to what files define.
// A bad file claims the names of its last good parse and the names it owns
// now, so that its workloads are neither deleted nor taken by another file
// while it is broken. It does not change its arguments.
func makePlan(files []fileState, lastGood map[string][]*spec.Workload, cur map[string]applied) plan {
	p := plan{problems: make(map[string][]error)}
	claims := make(map[string][]claim)
	for _, f := range files {
		if f.err == nil {
			for _, w := range f.ws {
				claims[w.Name] = append(claims[w.Name], claim{f.name, w})
			}
			continue
		}
		p.problems[f.name] = append(p.problems[f.name], f.err)
		held := make(map[string]bool)
		for _, w := range lastGood[f.name] {
			held[w.Name] = true
		}
		for name, a := range cur {
			if a.owner == f.name {
				held[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(held)) {
			claims[name] = append(claims[name], claim{file: f.name})
		}
	}

	for _, name := range slices.Sorted(maps.Keys(claims)) {
		cs := claims[name]
		if len(cs) > 1 {
			err := duplicateError(name, cs)
			for _, c := range cs {
				p.problems[c.file] = append(p.problems[c.file], err)
			}
			continue
		}
		c := cs[0]
		if c.w == nil {
			continue
		}
		a, ok := cur[name]
		if ok && a.owner == c.file && a.spec != nil && spec.Equal(a.spec, c.w) {
			continue
		}
		if ok && a.owner != c.file {
			// The applier lets only a workload's owner change it, so a
			// workload moving to another file is deleted, then created.
			p.deletes = append(p.deletes, deleteAction{name: name, owner: a.owner})
		}
		p.puts = append(p.puts, putAction{w: c.w, owner: c.file})
	}

	for name, a := range cur {
		if _, ok := claims[name]; !ok {
			p.deletes = append(p.deletes, deleteAction{name: name, owner: a.owner})
		}
	}
	slices.SortFunc(p.deletes, func(a, b deleteAction) int { return strings.Compare(a.name, b.name) })
	return p
}

func duplicateError(name string, cs []claim) error {
	files := make([]string, len(cs))
	for i, c := range cs {
		files[i] = c.file
	}
	return fmt.Errorf("workload %q is defined in %s: %w", name, strings.Join(files, " and "), ErrDuplicateName)
}
