package declarative

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// reconcile brings the applier to what the files define now. It is the only
// writer of applied and lastGood, and runs one at a time.
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

	p := makePlan(files, w.lastGood, w.applied)
	w.execute(ctx, p)
	if err := ctx.Err(); err != nil {
		// Failures of a cancelled reconcile say nothing about the files.
		return err
	}
	for _, f := range files {
		if f.err == nil {
			w.lastGood[f.name] = f.ws
		}
	}
	present := make(map[string]bool, len(files))
	for _, f := range files {
		present[f.name] = true
	}
	for name := range w.lastGood {
		if !present[name] {
			delete(w.lastGood, name)
		}
	}
	if len(dirErrs) > 0 {
		p.problems[""] = dirErrs
	}
	w.setProblems(joinProblems(p.problems))
	return errors.Join(dirErrs...)
}

// adopt learns, once, which workloads files owned before this watcher
// started, so that those whose file is gone are deleted like any other.
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
			w.applied[name] = applied{owner: owner}
		}
	}
	w.adopted = true
	return nil
}

// execute runs the plan, deletes first so that what they free (ports, names
// in a network) is there for the puts, and adds failures to p.problems. A
// failed action stays different from applied, so the next reconcile retries.
func (w *Watcher) execute(ctx context.Context, p plan) {
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
			p.problems[d.owner] = append(p.problems[d.owner], fmt.Errorf("delete workload %q: %w", d.name, err))
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
			p.problems[a.Owner] = append(p.problems[a.Owner], fmt.Errorf("apply workload %q: %w", name, err))
			if _, ok := w.applied[name]; !ok {
				// It may exist anyway; if its file goes, it must be deleted.
				w.applied[name] = applied{owner: a.Owner}
			}
			continue
		}
		w.applied[name] = applied{owner: a.Owner, spec: ours[i]}
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
	if w.onProblem == nil {
		return
	}
	for _, p := range changed {
		w.onProblem(p)
	}
}

func sortedProblems(m map[string]error) []Problem {
	out := make([]Problem, 0, len(m))
	for _, file := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Problem{File: file, Err: m[file]})
	}
	return out
}
