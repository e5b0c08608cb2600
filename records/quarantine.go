package records

// A stored workload record that does not load (damaged, or refused by a
// newer daemon's validation) is quarantined, never dropped: the record
// stays in the journal as it is, and its run, which may well be the
// workload serving fine, is kept with its run record. The quarantine is
// what is kept of each such name, the claim that applies and removals of
// a name take in turn, and the end of a kept run; what a quarantined name
// blocks, and who may lift it, is the supervisor's.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// quarantineKillWait bounds the wait for a kept run to end after SIGKILL.
const quarantineKillWait = 10 * time.Second

// Quarantine is the stored workload records that do not load, by name,
// with the runs kept for them. It is safe for concurrent use.
type Quarantine struct {
	store *Store
	log   *zap.Logger

	// mu guards names and each name's pid (its run is claim's); it is
	// never held while a claim is waited for, a run killed or a record
	// removed.
	mu    sync.Mutex
	names map[string]*Quarantined
}

// Quarantined is one quarantined name.
type Quarantined struct {
	Name string
	Bad  Bad
	// pid is the kept run's, for status; 0 without one. Guarded by the
	// quarantine's mu.
	pid int
	// run is the name's kept run, nil without one or once it is ended;
	// set before any claim, then guarded by claim, a one-slot lock that an
	// apply or a removal of the name holds.
	run   *Recovered
	claim chan struct{}
}

// Recovered is what an earlier daemon recorded of a run, with the run
// itself when it is still alive; Err says why it could not be told
// whether it is (its runtime did not answer). Neither: it is gone.
type Recovered struct {
	Run  Run
	Proc driver.Process
	Err  error
}

// NewQuarantine quarantines the records bad, as Workloads gives them, of
// store.
func NewQuarantine(store *Store, bad map[string]Bad, log *zap.Logger) *Quarantine {
	q := &Quarantine{store: store, log: log, names: make(map[string]*Quarantined, len(bad))}
	for name, b := range bad {
		q.names[name] = &Quarantined{Name: name, Bad: b, claim: make(chan struct{}, 1)}
	}
	return q
}

// Has reports whether name is quarantined.
func (q *Quarantine) Has(name string) bool { return q.get(name) != nil }

func (q *Quarantine) get(name string) *Quarantined {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.names[name]
}

// Keep makes r, a run recovered for quarantined name, the name's own: it
// is kept alive and adopted by nobody. A run known gone (neither alive
// nor unknown) leaves nothing to keep: its record is removed, and Keep
// says false, as it does for a name not quarantined, whose run it leaves
// alone. Keep is for the restore, before any claim.
func (q *Quarantine) Keep(name string, r Recovered) bool {
	n := q.get(name)
	if n == nil {
		return false
	}
	if r.Proc == nil && r.Err == nil {
		_ = q.store.RemoveRun(name)
		return false
	}
	q.mu.Lock()
	n.run, n.pid = &r, r.Run.Process.PID
	q.mu.Unlock()
	return true
}

// Names is every quarantined name.
func (q *Quarantine) Names() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.names))
	for n := range q.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// List is the quarantined names as status shows them, by name.
func (q *Quarantine) List() []status.Quarantined {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]status.Quarantined, 0, len(q.names))
	for _, n := range q.names {
		out = append(out, status.Quarantined{Name: n.Name, Error: n.Bad.Err.Error(), PID: n.pid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Each calls f for every quarantined name with what can be read of its
// record and whether a run is kept for it.
func (q *Quarantine) Each(f func(name string, bad Bad, running bool)) {
	q.mu.Lock()
	ns := make([]Quarantined, 0, len(q.names))
	for _, n := range q.names {
		ns = append(ns, Quarantined{Name: n.Name, Bad: n.Bad, pid: n.pid})
	}
	q.mu.Unlock()
	for _, n := range ns {
		f(n.Name, n.Bad, n.pid != 0)
	}
}

// Lift ends the quarantine of name: its record was replaced or deleted.
func (q *Quarantine) Lift(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.names, name)
}

// Claim takes quarantined name for an apply or a removal of it, until
// release, so that those of one name do not interleave. It gives nil, and
// a release that does nothing, when name is not quarantined, or no longer
// is once its turn came.
func (q *Quarantine) Claim(ctx context.Context, name string) (n *Quarantined, release func(), err error) {
	n = q.get(name)
	if n == nil {
		return nil, func() {}, nil
	}
	select {
	case n.claim <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release = func() { <-n.claim }
	if q.get(name) != n {
		release()
		return nil, func() {}, nil
	}
	return n, release, nil
}

// EndRun kills the kept run of n, claimed, and removes its record; its
// runtime, of drivers, is asked again when it did not answer at start. A
// run that may be alive is never left beside a new one: that it cannot be
// reached, or does not end, is an error.
func (q *Quarantine) EndRun(ctx context.Context, n *Quarantined, drivers map[spec.Kind]driver.Driver) error {
	r := n.run
	if r == nil {
		return nil
	}
	pid := r.Run.Process.PID
	p := r.Proc
	if p == nil {
		d := drivers[r.Run.Process.Driver]
		if d == nil {
			return fmt.Errorf("%w: the run of quarantined workload %s (pid %d) needs the %s runtime, which this daemon has not, to be ended first",
				errdefs.ErrRuntimeUnavailable, n.Name, pid, r.Run.Process.Driver)
		}
		var err error
		if p, err = d.Recover(ctx, r.Run.Process); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("%w: the run of quarantined workload %s (pid %d) cannot be reached to end it first: %v",
				errdefs.ErrRuntimeUnavailable, n.Name, pid, err)
		}
	}
	if p != nil {
		q.log.Warn("killing the run of a quarantined workload, to replace it", zap.String("workload", n.Name), zap.Int("pid", pid))
		_ = p.Kill()
		select {
		case <-p.Done():
		case <-time.After(quarantineKillWait):
			r.Proc = p
			return fmt.Errorf("the run of quarantined workload %s (pid %d) did not end %s after SIGKILL", n.Name, pid, quarantineKillWait)
		}
	}
	_ = q.store.RemoveRun(n.Name)
	q.mu.Lock()
	n.run, n.pid = nil, 0
	q.mu.Unlock()
	return nil
}

// Remove deletes the record of n, claimed and its run ended, and lifts
// its quarantine.
func (q *Quarantine) Remove(n *Quarantined) error {
	if err := q.store.RemoveWorkload(n.Name); err != nil {
		return err
	}
	q.Lift(n.Name)
	return nil
}

// Release stops watching the kept runs, for a daemon that exits: the next
// one finds them as this one did.
func (q *Quarantine) Release() {
	q.mu.Lock()
	ns := make([]*Quarantined, 0, len(q.names))
	for _, n := range q.names {
		ns = append(ns, n)
	}
	q.mu.Unlock()
	for _, n := range ns {
		n.claim <- struct{}{}
		if n.run != nil && n.run.Proc != nil {
			n.run.Proc.Release()
		}
		<-n.claim
	}
}
