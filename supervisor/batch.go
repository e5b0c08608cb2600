package supervisor

import (
	"context"
	"fmt"
	"slices"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/par"
	"github.com/flyd-dev/flyd/order"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// batchParallel bounds the operations a batch runs at once: enough to keep
// every core busy while others wait on a fork or an exit.
const batchParallel = 32

// Change is one workload of ApplyAll, with its own options (the workloads
// directory gives each its file as owner).
type Change struct {
	Spec    *spec.Workload
	Options ApplyOptions
}

// Outcome is what became of one workload of a batch.
type Outcome struct {
	Name     string
	Workload *status.Workload
	Err      error
}

// Action is what a batch does to each of its workloads.
type Action string

// Batch actions.
const (
	ActionStart   Action = "start"
	ActionStop    Action = "stop"
	ActionRestart Action = "restart"
	ActionRemove  Action = "remove"
	ActionSignal  Action = "signal"
	ActionReload  Action = "reload"
)

// BatchRequest is the workloads of a batch, by name or all, with what its
// action takes: Force for stop (kill at once) and remove (past an owner),
// Signal for signal.
type BatchRequest struct {
	Names []string
	All   bool
	// InProject narrows All to the workloads of Project ("" for the
	// default project's).
	InProject bool
	Project   string
	Force     bool
	Signal    string
	// Parallel stops and removes every workload at once; without it,
	// dependents go before what they depend on among each owner's
	// workloads, the owners side by side (stopLanes).
	Parallel bool
}

// ApplyAll is the one way many workloads are applied together, for the
// API's batches and the workloads directory alike. A name given twice or an
// `after` cycle refuses the whole batch before anything is applied. Then
// the changes are applied level by level in `after` order (spec.Order),
// each level in parallel, so that every workload a change names exists,
// and has had its first start attempt, before the change is applied. The
// outcomes come in that order.
func (s *Supervisor) ApplyAll(ctx context.Context, changes []Change) ([]Outcome, error) {
	specs := make([]*spec.Workload, len(changes))
	opts := make(map[string]ApplyOptions, len(changes))
	for i, c := range changes {
		// Ordered by full names: a batch may hold several projects.
		specs[i] = c.Spec.Clone()
		specs[i].Qualify()
		opts[specs[i].Name] = c.Options
	}
	levels, err := spec.OrderBatch(specs)
	if err != nil {
		return nil, err
	}
	s.settle.hold(len(changes))
	out := make([]Outcome, 0, len(changes))
	for _, level := range levels {
		out = append(out, s.applyLevel(ctx, level, opts)...)
	}
	s.settle.after(len(changes))
	return out, nil
}

// applyLevel applies a level of a batch in three steps: every spec checked
// and its ports reserved, in parallel; then the rules their declarations
// change projected once for them all; then each workload created or
// replaced, in parallel. A spec with replicas is applied as a group in the
// last step, on its own.
func (s *Supervisor) applyLevel(ctx context.Context, level []*spec.Workload, opts map[string]ApplyOptions) []Outcome {
	outs := make([]Outcome, len(level))
	pds := make([]*prepared, len(level))
	groups := make([]*spec.Workload, len(level))
	parallel(len(level), func(i int) {
		o := opts[level[i].Name]
		sp, err := s.normalize(ctx, level[i], o)
		switch {
		case err != nil:
		case sp.Replicated():
			groups[i] = sp
		default:
			pds[i], err = s.prepare(ctx, sp, o)
		}
		outs[i] = Outcome{Name: level[i].Name, Err: err}
	})
	var projectErr error
	if slices.ContainsFunc(pds, func(pd *prepared) bool { return pd != nil && pd.rulesPending }) {
		projectErr = s.net.Project()
	}
	parallel(len(level), func(i int) {
		var wl *status.Workload
		var err error
		switch pd := pds[i]; {
		case pd != nil && pd.rulesPending && projectErr != nil:
			pd.release()
			err = projectErr
		case pd != nil:
			wl, err = s.finish(ctx, pd)
		case groups[i] != nil:
			wl, err = s.applyGroup(ctx, groups[i], opts[level[i].Name])
		default:
			return // refused in the first step
		}
		outs[i] = Outcome{Name: level[i].Name, Workload: wl, Err: err}
	})
	networks := map[string]bool{}
	for _, sp := range level {
		if !networks[sp.Network] {
			networks[sp.Network] = true
			s.mountHook.Named(sp.Network)
		}
	}
	return outs
}

// Batch runs action on every workload bt names, in parallel. Names the
// daemon does not know get a not_found result each.
func (s *Supervisor) Batch(ctx context.Context, action Action, bt BatchRequest) ([]Outcome, error) {
	var op func(ctx context.Context, name string) (*status.Workload, error)
	stopping := false
	switch action {
	case ActionStart:
		op = s.Start
	case ActionStop:
		stopping = true
	case ActionRestart:
		op = s.Restart
	case ActionRemove:
		op = func(ctx context.Context, name string) (*status.Workload, error) {
			c := authz.CallerOf(ctx)
			return nil, s.Remove(ctx, name, RemoveOptions{Force: bt.Force, By: c.UID, Confined: c.Confined})
		}
	case ActionReload:
		op = func(ctx context.Context, name string) (*status.Workload, error) {
			_, err := s.Reload(ctx, name)
			return nil, err
		}
	case ActionSignal:
		sig, err := spec.ParseSignal(bt.Signal)
		if err != nil {
			return nil, fmt.Errorf("%w: signal: %v", errdefs.ErrInvalid, err)
		}
		op = func(ctx context.Context, name string) (*status.Workload, error) {
			return nil, s.Signal(ctx, name, sig)
		}
	default:
		return nil, fmt.Errorf("%w: no batch action %q (start, stop, restart, remove, signal, reload)", errdefs.ErrInvalid, action)
	}
	if bt.Signal != "" && action != ActionSignal {
		return nil, fmt.Errorf("%w: only a signal batch takes a signal", errdefs.ErrInvalid)
	}
	names := bt.Names
	switch {
	case bt.All && len(names) > 0:
		return nil, fmt.Errorf("%w: a batch takes names or all, not both", errdefs.ErrInvalid)
	case bt.All:
		// All of a confined caller's is all of its own.
		c := authz.CallerOf(ctx)
		for _, w := range s.all() {
			if authz.Decide(c, authz.Read, w.viewDoc()) == nil && (!bt.InProject || spec.ProjectOf(w.name) == bt.Project) {
				names = append(names, w.name)
			}
		}
		if len(names) == 0 {
			return []Outcome{}, nil
		}
	case len(names) == 0:
		return nil, fmt.Errorf("%w: a batch needs names, or all", errdefs.ErrInvalid)
	default:
		names = slices.Clone(names)
		// As an apply refuses a spec given twice: one name is one action.
		seen := make(map[string]bool, len(names))
		for _, n := range names {
			if seen[n] {
				return nil, fmt.Errorf("%w: workload %q is named twice", errdefs.ErrInvalid, n)
			}
			seen[n] = true
		}
		names = s.memberNames(names)
	}
	s.settle.hold(len(names))
	defer s.settle.after(len(names))
	outs := make([]Outcome, len(names))
	if stopping {
		lanes := [][][]string{{names}}
		if !bt.Parallel {
			lanes = s.stopLanes(names)
		}
		return order.InLanes(names, lanes, func(level []string) []Outcome {
			// Every workload of a level is set stopping before any stop is
			// waited for: a stop is a signal and a wait for processes to
			// end, so none need wait for another's (batchParallel at a
			// time, a stop of 1,000 took 32 rounds of exits and clean-ups).
			// Their states at rest are recorded together (records.Group).
			waits := make([]func() (*status.Workload, error), len(level))
			members := s.store.Group(len(level))
			for i, name := range level {
				waits[i] = s.stop(ctx, name, bt.Force, members[i])
			}
			outs := make([]Outcome, len(level))
			for i, wait := range waits {
				wl, err := wait()
				outs[i] = Outcome{Name: level[i], Workload: wl, Err: err}
			}
			return outs
		}), nil
	}
	if action == ActionRemove {
		return s.inStopOrder(names, bt.Parallel, func(name string) Outcome {
			wl, err := op(ctx, name)
			return Outcome{Name: name, Workload: wl, Err: err}
		}), nil
	}
	parallel(len(names), func(i int) {
		wl, err := op(ctx, names[i])
		outs[i] = Outcome{Name: names[i], Workload: wl, Err: err}
	})
	return outs, nil
}

// parallel runs f for 0..n-1, at most batchParallel at a time.
func parallel(n int, f func(i int)) { par.Each(n, batchParallel, f) }
