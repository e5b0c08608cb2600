package supervisor

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver"
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
// still alive, else the restart policy applied as to any ended run.
func (w *workload) restore(rec specRecord, run *recovered) {
	w.desired, w.owner = rec.Running, rec.Owner
	w.update(func(v *api.Workload) { v.Owner = rec.Owner })
	if w.s.drivers[rec.Spec.Kind] == nil {
		w.rest(api.StateFailed, fmt.Sprintf("this daemon has no %s runtime", rec.Spec.Kind))
		return
	}
	if run != nil {
		w.update(func(v *api.Workload) { v.Restarts = run.run.Restarts })
	}
	switch {
	case run != nil && run.proc != nil:
		w.proc = run.proc
		st := run.proc.State()
		w.update(func(v *api.Workload) {
			v.PID, v.ContainerID, v.StartedAt = st.PID, st.ContainerID, &st.StartedAt
		})
		if w.desired {
			w.setState(api.StateRunning, "adopted")
			// Running since the run started, not since this daemon did.
			if !st.StartedAt.IsZero() {
				w.update(func(v *api.Workload) { v.Since = st.StartedAt })
			}
			w.startHealth()
			return
		}
		_ = w.stopRun()
		w.rest(api.StateStopped, "")
	case run != nil:
		_ = w.s.store.removeRun(w.name)
		exit := driver.Exit{Unknown: true, At: time.Now()}
		w.update(func(v *api.Workload) { v.LastExit = &exit })
		w.log.Info("run ended while no daemon watched")
		w.afterExit(exit)
	case !w.desired:
		st := rec.Rest
		if st == "" {
			st = api.StateStopped
		}
		w.update(func(v *api.Workload) { v.LastError = rec.LastError })
		w.setState(st, "")
	default:
		w.start()
	}
}

// sweepDrivers lets each runtime that keeps state per workload remove
// what belongs to no spec (containers, temporary directories).
func (s *Supervisor) sweepDrivers(specs map[string]specRecord) {
	keep := make(map[string]bool, len(specs))
	for n := range specs {
		keep[n] = true
	}
	for kind, d := range s.drivers {
		if sw, ok := d.(driver.Sweeper); ok {
			if err := sw.Sweep(s.ctx, keep); err != nil {
				s.log.Warn("runtime sweep failed", zap.String("runtime", string(kind)), zap.Error(err))
			}
		}
	}
}
