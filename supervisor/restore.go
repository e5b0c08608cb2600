package supervisor

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/backoff"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// detach ends the loop for a daemon that exits: the run is released to the
// next daemon, or stopped.
func (w *workload) detach(stop bool) {
	w.cancelTimer()
	w.stopHealth()
	if stop {
		if err := w.stopRun(); err != nil {
			w.log.Error("stop on exit", zap.Error(err))
		}
	} else if w.proc != nil {
		w.proc.Release()
		w.proc = nil
	}
	w.gone = true
}

// restore brings a workload of an earlier daemon back: its run adopted when
// still alive, else the restart policy applied as to any ended run. A run
// that could not be told alive or gone is adopted later, by retries.
func (w *workload) restore(rec records.Workload, run *records.Recovered) {
	w.desired, w.owner, w.by = rec.Running, rec.Owner, rec.By
	// What the record keeps of the last run (only a workload at rest's
	// record has it) is shown until a run replaces it, and kept by a
	// record saved again below.
	w.update(func(v *status.Workload) {
		v.Owner, v.AppliedBy = rec.Owner, rec.By
		v.LastError, v.StartedAt, v.LastExit, v.Restarts = rec.LastError, rec.StartedAt, rec.LastExit.Exit(), rec.Restarts
	})
	w.boundLog(rec.By)
	if w.s.drivers[rec.Spec.Kind] == nil {
		w.halt(status.Failed, fmt.Sprintf("this daemon has no %s runtime", rec.Spec.Kind))
		return
	}
	if run != nil {
		w.update(func(v *status.Workload) {
			v.Restarts = run.Run.Restarts
			if t := run.Run.Process.StartedAt; !t.IsZero() {
				v.StartedAt = &t // the run's, ended or not
			}
		})
		// Taken again until it is known to be gone: it may be alive.
		r := w.newRun()
		r.Kept = run.Run.Kept
		w.adopt(r)
	}
	switch {
	case run != nil && run.Proc != nil:
		w.adopted(run.Proc)
		w.resume()
	case run != nil && run.Err != nil:
		w.unadopted = &run.Run
		w.retryLater(run.Err)
	case run != nil:
		w.lost()
		w.resume()
	case !w.desired:
		st := rec.Rest
		if st == "" {
			st = status.Stopped
		}
		w.setState(st, rec.Reason)
	default:
		w.start()
	}
}

// adopted takes an earlier daemon's live run as the current one.
func (w *workload) adopted(p driver.Process) {
	w.proc = p
	st := p.State()
	w.update(func(v *status.Workload) {
		v.PID, v.ContainerID, v.StartedAt = st.PID, st.ID, &st.StartedAt
	})
}

// lost records that an earlier daemon's run ended while no daemon watched.
func (w *workload) lost() {
	_ = w.s.store.RemoveRun(w.name)
	w.release()
	exit := wireExit(driver.Exit{Unknown: true, At: time.Now()})
	w.update(func(v *status.Workload) { v.LastExit = exit })
	w.log.Info("run ended while no daemon watched")
}

// resume goes on from an earlier daemon's run once it is known: watching
// it, stopping it if it should not run, or applying the restart policy to
// its end.
func (w *workload) resume() {
	if w.proc == nil {
		w.afterExit(driver.Exit{Unknown: true, At: time.Now()})
		return
	}
	if !w.desired {
		_ = w.stopRun()
		w.halt(status.Stopped, "")
		return
	}
	// Running since the run started, not since this daemon did.
	since := time.Now()
	if st := w.proc.State(); !st.StartedAt.IsZero() {
		since = st.StartedAt
	}
	w.setStateSince(status.Running, "adopted", since)
	w.poststart()
}

// adoptBackoff paces the retries of an adoption whose runtime is down.
var adoptBackoff = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}

// adoptPending asks again about a run that could not be adopted, so that a
// command about the workload acts on what is known: it errs while the run
// may be alive and cannot be reached.
func (w *workload) adoptPending() error {
	if w.unadopted == nil {
		return nil
	}
	rec := *w.unadopted
	p, err := w.s.drivers[rec.Process.Driver].Recover(w.s.ctx, rec.Process)
	switch {
	case err == nil:
		w.adopted(p)
	case errors.Is(err, errdefs.ErrNotFound):
		w.lost()
	default:
		return fmt.Errorf("%w: the run of %s that an earlier daemon started (pid %d) cannot be reached to adopt it: %v",
			errdefs.ErrRuntimeUnavailable, w.name, rec.Process.PID, err)
	}
	w.unadopted, w.adoptTries = nil, 0
	w.cancelTimer()
	return nil
}

// retryAdopt is a scheduled attempt at adopting the run again.
func (w *workload) retryAdopt() {
	if err := w.adoptPending(); err != nil {
		w.retryLater(err)
		return
	}
	w.resume()
}

// retryLater shows the run as unknown and schedules the next attempt.
func (w *workload) retryLater(err error) {
	w.adoptTries++
	d := adoptBackoff.Delay(w.adoptTries)
	w.log.Warn("cannot adopt the run of an earlier daemon yet", zap.Int("pid", w.unadopted.Process.PID), zap.Error(err), zap.Duration("retry_in", d))
	w.after(d, w.retryAdopt)
	w.setState(status.Unknown, fmt.Sprintf("cannot adopt its run (pid %d) yet: %v; trying again in %s",
		w.unadopted.Process.PID, err, d.Round(time.Millisecond)))
}

// sweepDrivers lets each runtime that keeps state per workload remove
// what belongs to no workload (containers, temporary directories): the
// specs' and the quarantined names' now, and those there are by then for
// a runtime that does not answer yet, swept once it does.
func (s *Supervisor) sweepDrivers(specs map[string]records.Workload) {
	later := func() map[string]bool {
		keep := s.kept(nil)
		for _, w := range s.unsorted() {
			keep[w.name] = true
		}
		return keep
	}
	done := s.drivers.Sweep(s.ctx, s.kept(specs), later, adoptBackoff.Delay, func(kind spec.Kind, attempt int, err error) {
		switch {
		case err == nil:
			s.log.Info("runtime swept", zap.String("runtime", string(kind)), zap.Int("attempts", attempt))
		case attempt == 1:
			s.log.Info("runtime sweep failed; trying again until it answers", zap.String("runtime", string(kind)), zap.Error(err))
		}
	})
	s.wg.Add(1)
	go func() { defer s.wg.Done(); <-done }()
}

// specsOf is the specs of records, by name.
func specsOf(recs map[string]records.Workload) map[string]*spec.Workload {
	out := make(map[string]*spec.Workload, len(recs))
	for n, r := range recs {
		out[n] = r.Spec
	}
	return out
}
