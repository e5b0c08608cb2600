package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/order"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// checkAfter refuses an `after` that names no workload, or that would
// close a cycle with the workloads there are.
func (s *Supervisor) checkAfter(sp *spec.Workload) error {
	for i, dep := range spec.AfterNames(sp.After) {
		if len(s.members(dep)) == 0 {
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
		ms := s.members(dep)
		if len(ms) == 0 {
			waiting = append(waiting, dep)
			continue
		}
		// A group is ready when each of its replicas is.
		for _, w := range ms {
			ready, why := order.Ready(w.snapshot(true), cond)
			if why != "" {
				return nil, why
			}
			if !ready {
				waiting = append(waiting, w.name)
			}
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

// dependentsNow is the workloads whose spec names prerequisites. Every
// start looks at them (kickDependents): only at them, none in a batch of
// independent workloads.
func (s *Supervisor) dependentsNow() []*workload {
	s.mu.Lock()
	defer s.mu.Unlock()
	deps := make([]*workload, 0, len(s.dependents))
	for w := range s.dependents {
		deps = append(deps, w)
	}
	return deps
}

// kickDependents asks every workload waiting for name to try again. The
// calls go on their own goroutines: a workload's loop never waits on
// another's.
func (s *Supervisor) kickDependents(name string) {
	group := s.groupOf(name)
	for _, w := range s.dependentsNow() {
		if v := w.view.Load(); !order.WaitsFor(*v, name) && (group == "" || !order.WaitsFor(*v, group)) {
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

// stopFollowers stops the runs of the workloads that follow name (an
// `after` entry of theirs ends in spec.AfterFollows), whose run just
// ended: each says so and waits, pending, until name is ready again, when
// kickDependents starts it. As kickDependents, on goroutines of their own.
func (s *Supervisor) stopFollowers(name string) {
	group := s.groupOf(name)
	for _, w := range s.dependentsNow() {
		if !order.Follows(w.specNow(), name, group) {
			continue
		}
		go func() {
			_ = w.call(s.ctx, func() error {
				if !w.desired || w.proc == nil {
					return nil
				}
				w.publish(status.Event{Type: status.EventFollow,
					Message: "stopped with " + name + ", which it follows; it starts again once " + name + " is ready"})
				if err := w.stopRun(); err != nil {
					return err
				}
				w.start() // pending until name is ready again
				return nil
			})
		}()
	}
}

// DeleteOwned and Owned, with ApplyAll, let the workloads directory's
// watcher keep its files applied.
func (s *Supervisor) DeleteOwned(ctx context.Context, name, owner string) error {
	err := s.remove(ctx, name, authz.Caller{File: owner})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	return err
}

func (s *Supervisor) Owned(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, w := range s.all() {
		if o := w.snapshot(false).Owner; o != "" {
			out[cmp.Or(w.group, w.name)] = o // a group is its file's
		}
	}
	return out, nil
}

// stopLanes groups names into the lanes and levels they stop in
// (order.StopLanes): dependents first among each owner's workloads
// (ownerOf: one owner but under --peer-users), the owners side by side,
// so that a stop of root's never waits for a peer's grace period.
func (s *Supervisor) stopLanes(names []string) [][][]string {
	return order.StopLanes(names, func(name string) *spec.Workload {
		if w, err := s.lookup(name); err == nil {
			return w.specNow()
		}
		return nil
	}, func(name string) uint32 {
		if w, err := s.lookup(name); err == nil {
			return s.ownerOf(w)
		}
		return 0
	})
}

// inStopOrder runs f on every name, in stopLanes' order (all at once
// with parallelAll), each level in parallel; the outcomes come in the
// order of names.
func (s *Supervisor) inStopOrder(names []string, parallelAll bool, f func(name string) Outcome) []Outcome {
	lanes := [][][]string{{names}}
	if !parallelAll {
		lanes = s.stopLanes(names)
	}
	return order.InLanes(names, lanes, func(level []string) []Outcome {
		outs := make([]Outcome, len(level))
		parallel(len(level), func(i int) { outs[i] = f(level[i]) })
		return outs
	})
}
