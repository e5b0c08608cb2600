package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// checkAfter refuses an `after` that names no workload, or that would
// close a cycle with the workloads there are.
func (s *Supervisor) checkAfter(sp *spec.Workload) error {
	for i, dep := range spec.AfterNames(sp.After) {
		if _, err := s.lookup(dep); err != nil {
			return &spec.FieldError{Field: fmt.Sprintf("after[%d]", i), Msg: fmt.Sprintf("%q names no workload (apply it first)", dep)}
		}
	}
	if len(sp.Prerequisites()) == 0 {
		return nil
	}
	all := []*spec.Workload{sp}
	for _, w := range s.all() {
		if v := w.snapshot(true); v.Name != sp.Name && v.Spec != nil {
			all = append(all, v.Spec)
		}
	}
	_, err := spec.Order(all)
	return err
}

// unready lists the workloads of after that are not ready yet by their
// entry's condition (spec.ParseAfter), and says why the workload can never
// start when a prerequisite will not become ready: it failed, or a
// one-shot it waits for to complete exited with an error.
func (s *Supervisor) unready(after []string) (waiting []string, never string) {
	for _, entry := range after {
		dep, cond := spec.ParseAfter(entry)
		w, err := s.lookup(dep)
		if err != nil {
			waiting = append(waiting, dep)
			continue
		}
		v := w.snapshot(true)
		healthy := v.Spec == nil || v.Spec.Health == nil || (v.Healthy != nil && *v.Healthy)
		completed := v.State == status.Exited && v.LastExit.Succeeded()
		switch {
		case v.State == status.Failed:
			return nil, fmt.Sprintf("%s, which it waits for, failed: %s", dep, v.LastError)
		case cond == spec.AfterCompleted && v.State == status.Exited && !completed:
			return nil, fmt.Sprintf("%s, which it waits for to complete, ended with %s", dep, v.LastExit)
		case cond == spec.AfterCompleted && completed:
		case cond == spec.AfterCompleted:
			waiting = append(waiting, dep)
		case v.State != status.Running, cond == spec.AfterHealthy && !healthy:
			waiting = append(waiting, dep)
		}
	}
	return waiting, ""
}

// trackDependent keeps s.dependents up to date with w's spec sp.
func (s *Supervisor) trackDependent(w *workload, sp *spec.Workload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackDependentLocked(w, sp)
}

func (s *Supervisor) trackDependentLocked(w *workload, sp *spec.Workload) {
	if len(sp.Prerequisites()) > 0 {
		s.dependents[w] = struct{}{}
	} else {
		delete(s.dependents, w)
	}
}

// kickDependents asks every workload waiting for name to try again. The
// calls go on their own goroutines: a workload's loop never waits on
// another's.
func (s *Supervisor) kickDependents(name string) {
	// Every start runs this: it looks only at the workloads that have
	// prerequisites, none in a batch of independent ones.
	s.mu.Lock()
	deps := make([]*workload, 0, len(s.dependents))
	for w := range s.dependents {
		deps = append(deps, w)
	}
	s.mu.Unlock()
	for _, w := range deps {
		if !w.waitsFor(name) {
			continue
		}
		go func() {
			_ = w.call(s.ctx, func() error {
				if w.desired && w.proc == nil && w.timer == nil {
					w.start()
				}
				return nil
			})
		}()
	}
}

// ownedBy refuses a change by anyone but the workload's owner: a workload
// created from a file changes through that file, unless forced.
func ownedBy(name, owner, by string, force bool) error {
	if owner == by || force {
		return nil
	}
	if owner == "" {
		return fmt.Errorf("%w: workload %s was created through the API, not by %s", errdefs.ErrConflict, name, by)
	}
	return fmt.Errorf("%w: workload %s belongs to %s in the workloads directory; change that file, or force", errdefs.ErrConflict, name, owner)
}

// DeleteOwned and Owned, with ApplyAll, let the workloads directory's
// watcher keep its files applied.
func (s *Supervisor) DeleteOwned(ctx context.Context, name, owner string) error {
	err := s.remove(ctx, name, removal{owner: owner})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	return err
}

func (s *Supervisor) Owned(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, w := range s.all() {
		if o := w.snapshot(false).Owner; o != "" {
			out[w.name] = o
		}
	}
	return out, nil
}

// waitsFor reports whether the workload is pending with name among its
// after list.
func (w *workload) waitsFor(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.State == status.Pending && w.view.Spec != nil && slices.Contains(spec.AfterNames(w.view.Spec.Prerequisites()), name)
}
