package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/status"
)

// startHealth starts checking the current run, when the spec has a check.
// Verdicts come back to the loop as commands; a verdict of a monitor
// stopped since is ignored.
func (w *workload) startHealth() {
	h := w.spec.Health
	if h == nil {
		return
	}
	var probe health.Probe // nil when the program tells readiness
	verdict := w.healthChanged
	if h.Notify || h.Log != "" {
		// An adopted run said READY=1 (or printed its line) to an earlier
		// daemon: it does not say it twice. Later messages come to a
		// socket bound anew.
		if h.Notify {
			if err := w.listenNotify(); err != nil {
				w.log.Warn("no notify socket", zap.Error(err))
			}
			if w.self.Watchdog != nil && w.ready {
				w.self.Watchdog.Arm()
			}
		}
		verdict = w.awakeChanged
	} else {
		var err error
		if probe, err = w.probe(); err != nil {
			w.log.Warn("no health check", zap.Error(err))
			return
		}
	}
	w.healthGen++
	gen := w.healthGen
	if h.Log != "" && !w.ready {
		w.startLogCheck(gen)
	}
	w.judge()
	// Every check also fails while the main process is stopped.
	probe = health.Awake(func() int { return int(w.runPID.Load()) }, probe)
	w.monitor = health.Start(probe, health.ConfigOf(h), func(ok bool, err error) {
		// Never wait on the loop from here: the loop may be stopping this
		// very monitor.
		go func() {
			_ = w.call(w.s.ctx, func() error { verdict(gen, ok, err); return nil })
		}()
	})
}

// judge gives the verdict of a run that tells its health itself
// (health.Told), when it changed.
func (w *workload) judge() {
	h := w.spec.Health
	if h == nil || !(h.Notify || h.Log != "") || w.proc == nil {
		return
	}
	ok, why, known := w.self.Verdict(w.ready)
	if !known {
		return // not ready yet, and not late
	}
	if was := w.view.Load().Healthy; was != nil && *was == ok {
		return
	}
	w.healthChanged(w.healthGen, ok, why)
}

// awakeChanged is the verdict of the look at the main process of a run
// that tells its health itself: stopped, it is unhealthy.
func (w *workload) awakeChanged(gen int, ok bool, err error) {
	if gen != w.healthGen {
		return
	}
	w.self.Asleep = nil
	if !ok {
		w.self.Asleep = err
	}
	w.judge()
}

func (w *workload) stopHealth() {
	w.healthGen++
	if w.monitor != nil {
		w.monitor.Stop()
		w.monitor = nil
	}
	if w.notify != nil {
		w.notify.Close()
		w.notify = nil
	}
	w.self.Stop()
	w.ready = false
	w.update(func(v *status.Workload) { v.Healthy = nil })
}

// prepareRun readies what a run's check needs before it starts, and
// what the program must be told: its notify socket, bound before it
// starts, and its watchdog's period; where its output begins in its
// log, so that no earlier run's line counts.
func (w *workload) prepareRun(env map[string]string) error {
	h := w.spec.Health
	switch {
	case h == nil:
	case h.Notify:
		// Listening before the program starts: it may say READY=1 at once.
		if err := w.listenNotify(); err != nil {
			return err
		}
		health.NotifyEnv(env, w.s.notifyPath(w.name), h.Watchdog.Duration)
	case h.Log != "":
		w.self.LogFrom = nil
		if end, err := health.LogEnd(w.s.logs.Of(w.name)); err == nil {
			w.self.LogFrom = &end
		} else {
			w.log.Warn("where the run's output begins in its log is not known: its log check reads what comes next", zap.Error(err))
		}
	}
	return nil
}

// withWatchdogPID has a watchdog program find its own pid
// (health.WithWatchdogPID).
func (w *workload) withWatchdogPID(args, env []string) []string {
	if h := w.spec.Health; h != nil {
		return health.WithWatchdogPID(args, env, h.Watchdog.Duration)
	}
	return args
}

// startLogCheck follows the run's output in its log for the spec's line:
// from where it began, or for an adopted run whose beginning is not
// known, from where the log ends now (health.FollowLog).
func (w *workload) startLogCheck(gen int) {
	h := w.spec.Health
	re, err := regexp.Compile(h.Log)
	if err != nil {
		w.log.Warn("no log check", zap.Error(err)) // validated at apply
		return
	}
	from := int64(-1) // not known: where the log ends when first read
	if w.self.LogFrom != nil {
		from = *w.self.LogFrom
	}
	started := time.Now()
	if st := w.proc.State(); !st.StartedAt.IsZero() {
		started = st.StartedAt
	}
	within := max(h.Timeout.Duration, h.StartPeriod.Duration)
	w.self.LogCheck = health.StartLogCheck(health.FollowLog(w.s.logs.Of(w.name), from), re, started, within, func(ok bool, err error) {
		go func() {
			_ = w.call(w.s.ctx, func() error { w.logChecked(gen, ok, err); return nil })
		}()
	})
}

// logChecked takes the log check's verdict: its line came, which is the
// run's readiness (kept for a later daemon, as READY=1 is), or it did not
// in time.
func (w *workload) logChecked(gen int, ok bool, err error) {
	if gen != w.healthGen || w.proc == nil {
		return
	}
	if ok {
		w.ready = true
		w.saveRun()
	} else {
		w.self.Late = err
	}
	w.judge()
}

// probe builds the check of the spec for the run: inside the workload's
// network, an exec check in its cgroup too, with its environment.
func (w *workload) probe() (health.Probe, error) {
	nw, err := w.s.net.Namespace(w.spec.Network)
	if err != nil {
		return nil, err
	}
	portOf := func(ep string) (int, bool) {
		for _, p := range w.ports {
			if p.Endpoint == ep {
				return p.Port, true
			}
		}
		return 0, false
	}
	return health.ProbeOf(w.spec.Health, nw, portOf, func(argv []string) (health.Probe, error) { return w.execIn(nw, argv) })
}

// healthChanged records a verdict: in the state, the events and the
// registry; a healthy workload may let its dependents start; an unhealthy
// one is restarted when its spec asks for it.
func (w *workload) healthChanged(gen int, ok bool, err error) {
	if gen != w.healthGen || w.proc == nil {
		return
	}
	if w.group != "" {
		// In its group's balance before it is shown healthy: a wait that
		// sees it up finds it taking connections.
		w.s.net.Serving(w.name, ok)
	}
	w.update(func(v *status.Workload) { v.Healthy = &ok })
	msg := "healthy"
	if !ok {
		msg = "unhealthy"
		if err != nil {
			msg += ": " + err.Error()
		}
	}
	w.log.Info("health", zap.Bool("healthy", ok), zap.Error(err))
	w.publish(status.Event{Type: status.EventHealth, State: status.Running, Message: msg})
	w.publishInstances(status.Running)
	if ok {
		w.s.kickDependents(w.name)
		return
	}
	if w.spec.Health.Restart {
		w.restartUnhealthy()
	}
}

// restartUnhealthy replaces a run whose health check keeps failing.
func (w *workload) restartUnhealthy() {
	if err := w.stopRun(); err != nil {
		w.log.Error("restart of an unhealthy run", zap.Error(err))
		return
	}
	var n int
	w.update(func(v *status.Workload) { v.Restarts++; n = v.Restarts })
	w.publish(status.Event{Type: status.EventRestart, Message: fmt.Sprintf("restart #%d: unhealthy", n)})
	w.start()
}

// notifyPath is where a notify workload's socket is.
func (s *Supervisor) notifyPath(name string) string {
	return filepath.Join(s.cfg.RunDir, "notify", name+".sock")
}

// listenNotify binds the workload's notify socket, unless it is bound:
// owned by the workload's user, heard only from the workload's processes.
func (w *workload) listenNotify() error {
	if w.notify != nil {
		return nil
	}
	path := w.s.notifyPath(w.name)
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return err
	}
	uid := 0
	if w.spec.User != "" {
		a, err := execenv.Lookup(w.spec.User)
		if err != nil {
			return fmt.Errorf("%w: user %q: %v", driver.ErrExec, w.spec.User, err)
		}
		uid = int(a.UID)
	}
	var n *health.Notify // read on the loop only, once set
	var d *health.Watchdog
	r := health.RunNotify{
		Path: path, UID: uid, Watchdog: w.spec.Health.Watchdog.Duration,
		Belongs: health.RunMember(w.s.cfg.Cgroups, w.name, func() int { return int(w.runPID.Load()) }),
		On: func(m health.Message) {
			go func() {
				_ = w.call(w.s.ctx, func() error {
					if w.notify == n {
						w.notified(m)
					}
					return nil
				})
			}()
		},
		Refused: func(pid int32, total, unsaid int, say bool) {
			w.update(func(v *status.Workload) { v.NotifyRefused = total })
			if say {
				w.log.Warn("notify messages from processes that are not the workload's, ignored",
					zap.Int32("pid", pid), zap.Int("since_last_said", unsaid), zap.Int("total", total))
			}
		},
		WatchdogChanged: func() {
			go func() {
				_ = w.call(w.s.ctx, func() error {
					if w.self.Watchdog == d {
						w.judge()
					}
					return nil
				})
			}()
		},
	}
	n, d, err := r.Listen()
	if err != nil {
		return err
	}
	w.notify, w.self.Watchdog = n, d
	return nil
}

// notified takes a message of the program's: READY=1 makes it healthy
// (once), STOPPING=1 unhealthy, STATUS= is shown as its reason.
func (w *workload) notified(m health.Message) {
	if w.proc == nil {
		return
	}
	if m.Status != "" {
		w.update(func(v *status.Workload) { v.Reason = m.Status })
	}
	switch {
	case m.Stopping:
		w.self.Stopping = true
	case m.Ready && !w.ready:
		w.ready = true
		w.saveRun()
	}
	w.judge()
}
