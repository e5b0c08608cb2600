package declarative

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// reconcile brings the applier to what the files define now. It is the only
// writer of applied, docs and lastGood, and runs one at a time.
func (w *Watcher) reconcile(ctx context.Context) error {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.sem }()

	var dirErrs []error
	if err := w.adopt(ctx); err != nil {
		dirErrs = append(dirErrs, err)
	}
	files, err := scan(w.dir)
	if err != nil {
		// Without a full listing every workload would look removed: change
		// nothing and keep what is known about the files.
		err = fmt.Errorf("read workloads directory: %w", err)
		w.setProblems(w.withDirProblem(append(dirErrs, err)))
		return err
	}

	// Documents are put before the workloads, kind by kind in rank
	// order, so that no workload runs unguarded or with a network's
	// defaults, and dropped after them in the reverse order, so that none
	// is left unguarded while it goes.
	kinds := directoryKinds()
	plans := make([]plan[spec.Document], len(kinds))
	wp := makePlan(files, w.lastGood, w.applied)
	problems := wp.problems
	for i, k := range kinds {
		plans[i] = planKind(docsOf(k), files, w.lastGood, w.docsOf(k.Name))
		for f, es := range plans[i].problems {
			problems[f] = append(problems[f], es...)
		}
	}
	for i, k := range kinds {
		putDocs(ctx, w, docsOf(k), plans[i], w.docsOf(k.Name), w.applier.PutDocOwned, problems)
	}
	w.execute(ctx, wp, problems)
	for i := len(kinds) - 1; i >= 0; i-- {
		kind := kinds[i].Name
		drop := func(ctx context.Context, name, owner string) error {
			return w.applier.DropDocOwned(ctx, kind, name, owner)
		}
		dropDocs(ctx, w, docsOf(kinds[i]), plans[i], w.docsOf(kind), drop, problems)
	}
	if err := ctx.Err(); err != nil {
		// Failures of a cancelled reconcile say nothing about the files.
		return err
	}
	present := make(map[string]bool, len(files))
	for _, f := range files {
		present[f.name] = true
		if f.err == nil {
			w.lastGood[f.name] = f
		}
	}
	for name := range w.lastGood {
		if !present[name] {
			delete(w.lastGood, name)
		}
	}
	if len(dirErrs) > 0 {
		problems[""] = dirErrs
	}
	w.setProblems(joinProblems(problems))
	return errors.Join(dirErrs...)
}

// has says whether m has key.
func has[V any](m map[string]V, key string) bool {
	_, ok := m[key]
	return ok
}

// docsOf is what the watcher last put of a kind: name → applied.
func (w *Watcher) docsOf(kind string) map[string]applied[spec.Document] {
	m := w.docs[kind]
	if m == nil {
		m = make(map[string]applied[spec.Document])
		w.docs[kind] = m
	}
	return m
}

// adopt learns, once, which workloads and documents files owned before this
// watcher started, so that those whose file is gone are deleted like any
// other.
func (w *Watcher) adopt(ctx context.Context) error {
	if w.adopted {
		return nil
	}
	owned, err := w.applier.Owned(ctx)
	if err != nil {
		return fmt.Errorf("list workloads owned by files: %w", err)
	}
	for name, owner := range owned {
		if _, ok := w.applied[name]; !ok {
			w.applied[name] = applied[*spec.Workload]{owner: owner}
		}
	}
	docs, err := w.applier.OwnedDocuments(ctx)
	if err != nil {
		return fmt.Errorf("list documents owned by files: %w", err)
	}
	for key, owner := range docs {
		kind, name, _ := strings.Cut(key, "/")
		if k, ok := spec.DocKindOf(kind); ok && k.InDirectory {
			if cur := w.docsOf(kind); !has(cur, name) {
				cur[name] = applied[spec.Document]{owner: owner}
			}
		}
	}
	w.adopted = true
	return nil
}

// putDocs puts the documents of one kind the plan asks for, and adds
// failures to problems; a failed put stays different from applied, so the
// next reconcile retries.
func putDocs[D doc](ctx context.Context, w *Watcher, k kind[D], p plan[D], cur map[string]applied[D], put func(context.Context, D, string) error, problems map[string][]error) {
	for _, a := range p.puts {
		if ctx.Err() != nil {
			return
		}
		name := k.name(a.w)
		if err := put(ctx, a.w, a.owner); err != nil {
			problems[a.owner] = append(problems[a.owner], fmt.Errorf("apply %s %q: %w", k.what, name, err))
			if _, ok := cur[name]; !ok {
				cur[name] = applied[D]{owner: a.owner} // it may exist anyway
			}
			continue
		}
		cur[name] = applied[D]{owner: a.owner, spec: a.w}
		w.log.Info("applied document from file", zap.String("kind", k.what), zap.String("name", name), zap.String("file", a.owner))
	}
}

// dropDocs drops the documents of one kind that no file defines any more.
func dropDocs[D doc](ctx context.Context, w *Watcher, k kind[D], p plan[D], cur map[string]applied[D], drop func(context.Context, string, string) error, problems map[string][]error) {
	for _, d := range p.deletes {
		if ctx.Err() != nil {
			return
		}
		if a, ok := cur[d.name]; ok && a.owner != d.owner {
			continue // put anew by another file meanwhile
		}
		err := drop(ctx, d.name, d.owner)
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrConflict) {
			err = nil // gone, or no longer this file's
		}
		if err != nil {
			problems[d.owner] = append(problems[d.owner], fmt.Errorf("remove %s %q: %w", k.what, d.name, err))
			continue
		}
		delete(cur, d.name)
		w.log.Info("removed document of a file", zap.String("kind", k.what), zap.String("name", d.name), zap.String("file", d.owner))
	}
}

// execute runs the workloads' plan, deletes first so that what they free
// (ports, names in a network) is there for the puts, and adds failures to
// problems. A failed action stays different from applied, so the next
// reconcile retries.
func (w *Watcher) execute(ctx context.Context, p plan[*spec.Workload], problems map[string][]error) {
	stuck := make(map[string]bool) // names whose delete failed
	for _, d := range p.deletes {
		if ctx.Err() != nil {
			return
		}
		err := w.applier.DeleteOwned(ctx, d.name, d.owner)
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrConflict) {
			// Gone, or owned by someone else now (the API, a forced
			// change): nothing of this file's is left to remove.
			w.log.Info("workload of a file is no longer its own", zap.String("workload", d.name), zap.String("file", d.owner), zap.Error(err))
			err = nil
		}
		if err != nil {
			problems[d.owner] = append(problems[d.owner], fmt.Errorf("delete workload %q: %w", d.name, err))
			stuck[d.name] = true
			continue
		}
		delete(w.applied, d.name)
		w.log.Info("deleted workload of a file", zap.String("workload", d.name), zap.String("file", d.owner))
	}
	if ctx.Err() != nil {
		return
	}
	var puts []Put
	var ours []*spec.Workload
	for _, a := range p.puts {
		if stuck[a.w.Name] {
			continue // it still belongs to the file it is moving from
		}
		// The applier gets its own copy: ours is compared on later reconciles.
		puts = append(puts, Put{Spec: a.w.Clone(), Owner: a.owner})
		ours = append(ours, a.w)
	}
	if len(puts) == 0 {
		return
	}
	errs := w.applier.PutOwned(ctx, puts)
	for i, a := range puts {
		name := a.Spec.Name
		err := errNoOutcome
		if i < len(errs) {
			err = errs[i]
		}
		if err != nil {
			problems[a.Owner] = append(problems[a.Owner], fmt.Errorf("apply workload %q: %w", name, err))
			if _, ok := w.applied[name]; !ok {
				// It may exist anyway; if its file goes, it must be deleted.
				w.applied[name] = applied[*spec.Workload]{owner: a.Owner}
			}
			continue
		}
		w.applied[name] = applied[*spec.Workload]{owner: a.Owner, spec: ours[i]}
		w.log.Info("applied workload from file", zap.String("workload", name), zap.String("file", a.Owner))
	}
}

// errNoOutcome stands for a put the applier said nothing about.
var errNoOutcome = errors.New("the daemon reported no outcome")

func joinProblems(errs map[string][]error) map[string]error {
	out := make(map[string]error, len(errs))
	for file, es := range errs {
		if len(es) == 1 {
			out[file] = es[0]
		} else if len(es) > 1 {
			out[file] = errors.Join(es...)
		}
	}
	return out
}

// withDirProblem is the current problems with the directory's replaced.
func (w *Watcher) withDirProblem(errs []error) map[string]error {
	w.mu.Lock()
	next := maps.Clone(w.problems)
	w.mu.Unlock()
	next[""] = errors.Join(errs...)
	return next
}

// setProblems replaces the problems and reports the difference: a problem is
// new when its message changed, so a failure retried every resync is reported
// once.
func (w *Watcher) setProblems(next map[string]error) {
	w.mu.Lock()
	prev := w.problems
	w.problems = next
	w.mu.Unlock()

	var changed []Problem
	for _, file := range slices.Sorted(maps.Keys(next)) {
		if old, ok := prev[file]; !ok || old.Error() != next[file].Error() {
			changed = append(changed, Problem{File: file, Err: next[file]})
			w.log.Warn("workload file problem", zap.String("file", file), zap.Error(next[file]))
		}
	}
	for _, file := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := next[file]; !ok {
			changed = append(changed, Problem{File: file})
			w.log.Info("workload file problem resolved", zap.String("file", file))
		}
	}
	for _, p := range changed {
		w.publish(p)
		if w.onProblem != nil {
			w.onProblem(p)
		}
	}
}

// publish tells the events' readers of a problem that is new, or of a file
// good again (p.Err nil). An event that cannot be kept for later readers
// still reaches those reading now, and the problem stays in FileProblems.
func (w *Watcher) publish(p Problem) {
	if w.events == nil {
		return
	}
	ev := status.Event{Time: time.Now(), Type: status.EventFile, Message: p.File + ": ok"}
	if p.Err != nil {
		ev.Message = p.File + ": " + p.Err.Error()
	}
	if err := w.events.Publish(ev); err != nil {
		w.log.Warn("cannot keep a file's event for readers that resume", zap.Error(err))
	}
}

func sortedProblems(m map[string]error) []Problem {
	out := make([]Problem, 0, len(m))
	for _, file := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Problem{File: file, Err: m[file]})
	}
	return out
}
