package declarative

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// fakeApplier is the supervisor as the watcher sees it: an in-memory map of
// workloads with their owners, a log of calls, and failures on demand. Like
// the supervisor, it lets only a workload's owner change or delete it; an
// owner "" is a workload created through the API.
type fakeApplier struct {
	mu        sync.Mutex
	workloads map[string]fakeWorkload
	calls     []string
	failPut   map[string]error // workload name → error
	failDel   map[string]error
	failOwned error
	docs      map[string]string // DocKey → owner
}

type fakeWorkload struct {
	owner string
	spec  *spec.Workload
}

func newFakeApplier(owned map[string]string) *fakeApplier {
	f := &fakeApplier{workloads: make(map[string]fakeWorkload), failPut: map[string]error{}, failDel: map[string]error{}, docs: map[string]string{}}
	for name, owner := range owned {
		f.workloads[name] = fakeWorkload{owner: owner, spec: &spec.Workload{Name: name, Command: []string{"/bin/adopted"}}}
	}
	return f
}

func (f *fakeApplier) PutOwned(_ context.Context, puts []Put) []error {
	errs := make([]error, len(puts))
	for i, p := range puts {
		errs[i] = f.put(p.Spec, p.Owner)
	}
	return errs
}

func (f *fakeApplier) put(w *spec.Workload, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("put %s %s", w.Name, owner))
	if err := f.failPut[w.Name]; err != nil {
		return err
	}
	if cur, ok := f.workloads[w.Name]; ok && cur.owner != owner {
		return fmt.Errorf("%w: workload %s belongs to %q", errdefs.ErrConflict, w.Name, cur.owner)
	}
	f.workloads[w.Name] = fakeWorkload{owner: owner, spec: w}
	return nil
}

func (f *fakeApplier) DeleteOwned(_ context.Context, name, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("delete %s %s", name, owner))
	if err := f.failDel[name]; err != nil {
		return err
	}
	cur, ok := f.workloads[name]
	if !ok {
		return fmt.Errorf("%w: workload %s", errdefs.ErrNotFound, name)
	}
	if cur.owner != owner {
		return fmt.Errorf("%w: workload %s belongs to %q", errdefs.ErrConflict, name, cur.owner)
	}
	delete(f.workloads, name)
	return nil
}

func (f *fakeApplier) Owned(context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOwned != nil {
		return nil, f.failOwned
	}
	out := make(map[string]string)
	for name, w := range f.workloads {
		if w.owner != "" {
			out[name] = w.owner
		}
	}
	return out, nil
}

// state renders the workloads as "name owner command" lines, sorted, so a
// test can compare them with one string.
func (f *fakeApplier) state() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(f.workloads)) {
		w := f.workloads[name]
		owner := w.owner
		if owner == "" {
			owner = "(api)"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", name, owner, strings.Join(w.spec.Command, " ")))
	}
	return strings.Join(lines, "\n")
}

func (f *fakeApplier) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeApplier) setFailures(put, del map[string]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failPut, f.failDel = maps.Clone(put), maps.Clone(del)
	if f.failPut == nil {
		f.failPut = map[string]error{}
	}
	if f.failDel == nil {
		f.failDel = map[string]error{}
	}
}

var errDiskFull = errors.New("disk full")

// problemLog records OnProblem calls.
type problemLog struct {
	mu     sync.Mutex
	events []string // "file: err" or "file: ok"
}

func (l *problemLog) record(p Problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.Err == nil {
		l.events = append(l.events, p.File+": ok")
		return
	}
	l.events = append(l.events, p.File+": "+p.Err.Error())
}

func (l *problemLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (f *fakeApplier) putDoc(key, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("put %s %s", key, owner))
	if cur, ok := f.docs[key]; ok && cur != owner {
		return fmt.Errorf("%w: %s belongs to %q", errdefs.ErrConflict, key, cur)
	}
	f.docs[key] = owner
	return nil
}

func (f *fakeApplier) dropDoc(key, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("drop %s %s", key, owner))
	cur, ok := f.docs[key]
	if !ok {
		return fmt.Errorf("%w: %s", errdefs.ErrNotFound, key)
	}
	if cur != owner {
		return fmt.Errorf("%w: %s belongs to %q", errdefs.ErrConflict, key, cur)
	}
	delete(f.docs, key)
	return nil
}

func (f *fakeApplier) PutDocOwned(_ context.Context, d spec.Document, owner string) error {
	return f.putDoc(d.DocKind()+"/"+d.DocName(), owner)
}

func (f *fakeApplier) DropDocOwned(_ context.Context, kind, name, owner string) error {
	return f.dropDoc(kind+"/"+name, owner)
}

func (f *fakeApplier) OwnedDocuments(context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.docs), nil
}
