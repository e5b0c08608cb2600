package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A group is a spec with replicas: N workloads NAME-1…NAME-N, each a whole
// workload of its own (process, cgroup, log, health, restarts) whose spec
// says which group it is of. The group itself is no workload: its name
// stands for its replicas wherever a workload is named (after, uses,
// references, batches, removal), and its published ports are held by the
// group in the network plane, which balances them across the replicas
// that are ready.

// replicaReadyWithin bounds how long a rolling replace waits for a
// replaced replica to be ready before it touches the next, as Nomad's
// healthy deadline does.
const replicaReadyWithin = 5 * time.Minute

// replicas are the workloads of group by index, none when it is not one.
func (s *Supervisor) replicas(group string) map[int]*workload {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]*workload{}
	for i := 1; i <= spec.MaxReplicas; i++ {
		if w, ok := s.workloads[spec.ReplicaName(group, i)]; ok && w.group == group {
			out[i] = w
		}
	}
	return out
}

// members are the workloads a name stands for: the workload of that name,
// or a group's replicas in order; none when the name is neither.
func (s *Supervisor) members(name string) []*workload {
	if w, err := s.lookup(name); err == nil {
		return []*workload{w}
	}
	rs := s.replicas(name)
	out := make([]*workload, 0, len(rs))
	for i := 1; i <= spec.MaxReplicas && len(out) < len(rs); i++ {
		if w := rs[i]; w != nil {
			out = append(out, w)
		}
	}
	return out
}

// groupOf is the group workload name is a replica of, "" for none.
func (s *Supervisor) groupOf(name string) string {
	if w, err := s.lookup(name); err == nil {
		return w.group
	}
	return ""
}

// memberNames is names with each group's name replaced by its replicas'.
func (s *Supervisor) memberNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		ms := s.members(n)
		if len(ms) == 0 {
			out = append(out, n) // not found: said so by whoever acts on it
			continue
		}
		for _, w := range ms {
			out = append(out, w.name)
		}
	}
	return out
}

// applyGroup makes group g's replicas what its spec says: replicas
// 1…N applied in order, those above N removed. A replica that ran before
// is replaced and, with Start, ready before the next one is touched (a
// rolling replace), so that a published port always has a replica to
// balance to. A workload of the group's own name (the spec without
// replicas) gives way first.
func (s *Supervisor) applyGroup(ctx context.Context, g *spec.Workload, o ApplyOptions) (*status.Workload, error) {
	rm := o.caller()
	if _, err := s.lookup(g.Name); err == nil {
		if err := s.remove(ctx, g.Name, rm); err != nil {
			return nil, fmt.Errorf("%s becomes a group of replicas: %w", g.Name, err)
		}
	}
	had := s.replicas(g.Name)
	var first *status.Workload
	for i := 1; i <= g.Replicas; i++ {
		r := g.Replica(i)
		if w, err := s.lookup(r.Name); err == nil && had[i] == nil {
			return first, fmt.Errorf("%w: replica %s of %s: %s", errdefs.ErrConflict, r.Name, g.Name, w.notAReplica())
		}
		st, err := s.applyOne(ctx, r, o)
		if err != nil {
			return st, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		if first == nil {
			first = st
		}
		if had[i] != nil && o.Start && !g.Disabled && i < g.Replicas {
			if err := s.awaitReady(ctx, r.Name); err != nil {
				return first, fmt.Errorf("replica %s: %w; the replicas after it keep their runs", r.Name, err)
			}
		}
	}
	var errs []error
	for i := spec.MaxReplicas; i > g.Replicas; i-- {
		if had[i] != nil {
			if err := s.remove(ctx, had[i].name, rm); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				errs = append(errs, err)
			}
		}
	}
	return first, errors.Join(errs...)
}

// notAReplica says what the workload is, of a name a group's replica
// would take: a workload of its own, or another group's replica.
func (w *workload) notAReplica() string {
	if w.group == "" {
		return fmt.Sprintf("a workload named %s exists, of its own, not a replica (flyd rm %s frees the name)", w.name, w.name)
	}
	return fmt.Sprintf("a workload named %s exists, a replica of %s", w.name, w.group)
}

// awaitReady waits until workload name runs and, with a health check,
// has passed it; a failure, or an exit, ends the wait with why.
func (s *Supervisor) awaitReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, replicaReadyWithin)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting, never := s.unready([]string{name})
		switch {
		case never != "":
			return fmt.Errorf("it will not be ready: %s", never)
		case len(waiting) == 0:
			return nil
		}
		if w, err := s.lookup(name); err == nil {
			if v := w.snapshot(false); v.State == status.Exited || v.State == status.Backoff {
				return fmt.Errorf("it is %s (%s), not ready", v.State, v.Reason)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w", replicaReadyWithin, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// removeGroup removes a group's replicas, the last first.
func (s *Supervisor) removeGroup(ctx context.Context, group string, o authz.Caller, notFound error) error {
	rs := s.replicas(group)
	if len(rs) == 0 {
		return notFound
	}
	idx := make([]int, 0, len(rs))
	for i := range rs {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var errs []error
	for _, i := range slices.Backward(idx) {
		if err := s.remove(ctx, rs[i].name, o); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Scale applies a group again with n replicas; a workload that is no group
// becomes one (its spec with replicas: n).
func (s *Supervisor) Scale(ctx context.Context, name string, n int, o ApplyOptions) (*status.Workload, error) {
	ms := s.members(name)
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: no workload or group of replicas named %q", errdefs.ErrNotFound, name)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: replicas: at least 1 (flyd rm removes a group)", errdefs.ErrInvalid)
	}
	sp := ms[0].specNow()
	var g *spec.Workload
	if ms[0].group == name {
		g = sp.Group(n)
	} else if sp.ReplicaOf != "" {
		return nil, fmt.Errorf("%w: %s is a replica of %s: scale the group", errdefs.ErrInvalid, name, sp.ReplicaOf)
	} else {
		g = sp.Clone()
		g.Replicas = n
	}
	return s.Apply(ctx, g, o)
}
