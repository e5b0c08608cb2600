package supervisor

// A stored record that does not load (damaged, or refused by a newer
// daemon's validation) is quarantined, never dropped: the record stays in
// the journal as it is, status and the log report it, and its run, which
// may well be the workload serving fine, is kept alive with all it owns
// (run record, cgroup, carrier directory, network, ports). Nothing sweeps
// them. Applying the name replaces the record, once the old run is
// killed, since a second run must never start beside one that may be
// alive; removing the name kills the run and deletes the record.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/status"
)

type quarantined struct {
	name string
	bad  records.Bad
	// pid is the kept run's, for status; 0 without one.
	pid int
	// run is what an earlier daemon recorded of the name's run, nil
	// without one or once it is ended; set at restore, then guarded by
	// claim, a one-slot lock that an apply or a removal of the name holds.
	// pid is guarded by s.qmu.
	run   *recovered
	claim chan struct{}
}

// quarantineAll records the bad records of a restore, before any loop
// runs.
func (s *Supervisor) quarantineAll(bad map[string]records.Bad) {
	s.quarantine = make(map[string]*quarantined, len(bad))
	for name, b := range bad {
		s.quarantine[name] = &quarantined{name: name, bad: b, claim: make(chan struct{}, 1)}
	}
}

// keepRun makes a restored run of a quarantined name its own: it is kept
// alive and adopted by nobody. A run known gone leaves nothing to keep.
func (q *quarantined) keepRun(r *recovered) bool {
	if r.proc == nil && r.err == nil {
		return false
	}
	q.run, q.pid = r, r.run.Process.PID
	return true
}

func (s *Supervisor) logQuarantine() {
	for _, q := range s.quarantine {
		s.log.Error("quarantined a stored workload that cannot be loaded: its record and its run are kept as they are; apply or remove the name to replace them",
			zap.String("workload", q.name), zap.Error(q.bad.Err), zap.Int("pid", q.pid))
	}
}

func (s *Supervisor) quarantined(name string) *quarantined {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.quarantine[name]
}

// unquarantine ends the quarantine of name: its record was replaced or
// deleted.
func (s *Supervisor) unquarantine(name string) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	delete(s.quarantine, name)
}

// quarantinedList is what status shows.
func (s *Supervisor) quarantinedList() []status.Quarantined {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	out := make([]status.Quarantined, 0, len(s.quarantine))
	for _, q := range s.quarantine {
		out = append(out, status.Quarantined{Name: q.name, Error: q.bad.Err.Error(), PID: q.pid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// quarantinedNetworks is the quarantined names as the network plane
// keeps them: in the network their record names, or in every network
// while it names none and their run lives on.
func (s *Supervisor) quarantinedNetworks() map[string]netplane.Quarantined {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	out := make(map[string]netplane.Quarantined, len(s.quarantine))
	for name, q := range s.quarantine {
		out[name] = netplane.Quarantined{Network: q.bad.Network, Running: q.pid != 0}
	}
	return out
}

// kept is every name whose state a starting daemon must not sweep: the
// specs', and the quarantined ones'.
func (s *Supervisor) kept(specs map[string]records.Workload) map[string]bool {
	keep := make(map[string]bool, len(specs))
	for n := range specs {
		keep[n] = true
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	for n := range s.quarantine {
		keep[n] = true
	}
	return keep
}

// claimQuarantine takes the quarantined record of name, if there is one,
// for op (an apply or a removal) of that name by c: its run is ended
// first. The claim lasts until release, so that applies and removals of
// the name do not interleave; a name no longer quarantined by then is not
// claimed.
func (s *Supervisor) claimQuarantine(ctx context.Context, name string, c authz.Caller, op authz.Op) (q *quarantined, release func(), err error) {
	q = s.quarantined(name)
	if q == nil {
		return nil, func() {}, nil
	}
	select {
	case q.claim <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release = func() { <-q.claim }
	if s.quarantined(name) != q {
		release()
		return nil, func() {}, nil
	}
	// Only the file's ownership is judged: a bad record keeps no applier.
	err = authz.Decide(authz.Caller{File: c.File, Force: c.Force}, op, authz.Doc{Name: name, Exists: true, Owner: q.bad.Owner})
	if err == nil {
		err = s.endQuarantinedRun(ctx, q)
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return q, release, nil
}

// endQuarantinedRun kills a quarantined name's run, asking its runtime
// again when it did not answer at start: a run that may be alive is never
// left beside a new one.
func (s *Supervisor) endQuarantinedRun(ctx context.Context, q *quarantined) error {
	r := q.run
	if r == nil {
		return nil
	}
	pid := r.run.Process.PID
	p := r.proc
	if p == nil {
		d := s.drivers[r.run.Process.Driver]
		if d == nil {
			return fmt.Errorf("%w: the run of quarantined workload %s (pid %d) needs the %s runtime, which this daemon has not, to be ended first",
				errdefs.ErrRuntimeUnavailable, q.name, pid, r.run.Process.Driver)
		}
		var err error
		if p, err = d.Recover(ctx, r.run.Process); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("%w: the run of quarantined workload %s (pid %d) cannot be reached to end it first: %v",
				errdefs.ErrRuntimeUnavailable, q.name, pid, err)
		}
	}
	if p != nil {
		s.log.Warn("killing the run of a quarantined workload, to replace it", zap.String("workload", q.name), zap.Int("pid", pid))
		_ = p.Kill()
		select {
		case <-p.Done():
		case <-time.After(killWait):
			r.proc = p
			return fmt.Errorf("the run of quarantined workload %s (pid %d) did not end %s after SIGKILL", q.name, pid, killWait)
		}
	}
	_ = s.store.RemoveRun(q.name)
	s.qmu.Lock()
	q.run, q.pid = nil, 0
	s.qmu.Unlock()
	return nil
}

// removeQuarantined removes a quarantined name: its run, its record and
// all it owned. notFound is the answer when the name is not quarantined.
func (s *Supervisor) removeQuarantined(ctx context.Context, name string, o authz.Caller, notFound error) error {
	q, release, err := s.claimQuarantine(ctx, name, o, authz.Remove)
	if err != nil {
		return err
	}
	if q == nil {
		release()
		if _, err := s.lookup(name); err == nil {
			return s.remove(ctx, name, o) // applied while we waited
		}
		return notFound
	}
	defer release()
	if err := s.store.RemoveWorkload(name); err != nil {
		return err
	}
	s.unquarantine(name)
	s.destroy(name)
	s.net.Release(name, "")
	if n := q.bad.Network; n != "" {
		s.net.Drop(n)
	}
	s.log.Info("removed a quarantined workload", zap.String("workload", name))
	s.publish(status.Event{Type: status.EventRemoved, Workload: name, Message: "quarantined record removed"})
	return nil
}

// releaseQuarantined stops watching the kept runs, for a daemon that
// exits: the next one finds them as this one did.
func (s *Supervisor) releaseQuarantined() {
	s.qmu.Lock()
	qs := make([]*quarantined, 0, len(s.quarantine))
	for _, q := range s.quarantine {
		qs = append(qs, q)
	}
	s.qmu.Unlock()
	for _, q := range qs {
		q.claim <- struct{}{}
		if q.run != nil && q.run.proc != nil {
			q.run.proc.Release()
		}
		<-q.claim
	}
}
