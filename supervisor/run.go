package supervisor

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/backoff"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/wiring"
)

// start begins a run. A failure that retrying cannot fix leaves the
// workload failed at once; any other is retried by policy.
func (w *workload) start() {
	if w.unadopted != nil {
		return // never a second run beside one that may be alive
	}
	w.cancelTimer()
	waiting, never := w.s.unready(w.spec.Prerequisites())
	if never != "" {
		w.halt(status.Failed, never)
		return
	}
	if len(waiting) > 0 {
		// Started again when what it waits for changes (kickDependents).
		w.setState(status.Pending, "waiting for "+strings.Join(waiting, ", "))
		return
	}
	w.setState(status.Starting, "")
	p, err := w.launch()
	if err != nil {
		w.noteStartFailure(err)
		if errors.Is(err, driver.ErrExec) || errors.Is(err, errdefs.ErrInvalid) {
			w.halt(status.Failed, err.Error())
			return
		}
		w.scheduleRestart(err.Error())
		return
	}
	w.proc = p
	st := p.State()
	w.run.Process = st
	w.saveRun()
	w.update(func(v *status.Workload) {
		v.PID, v.ContainerID, v.LastError = st.PID, st.ID, ""
		v.StartedAt = &st.StartedAt
	})
	w.setState(status.Running, "")
	w.poststart()
}

// launch starts a run: its hooks acquire what it needs, its command and
// environment are planned, its runtime starts it. A run that does not
// start leaves nothing acquired.
func (w *workload) launch() (driver.Process, error) {
	if w.lastRun != nil {
		// The run before this one must have let go of its pid.
		<-w.lastRun
		w.lastRun = nil
	}
	resolved, used, err := w.s.wire(w.spec, w.by, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	r := w.newRun()
	r.Env = used
	if r.Env == nil {
		r.Env = map[string]string{}
	}
	r.Task.CarrierDir = w.s.carriers.Dir(w.name)
	r.Task.Preparing = func(what string) { w.setState(status.Preparing, what) }
	if err := w.prestart(r); err != nil {
		return nil, err
	}
	pl, err := wiring.PlanRun(resolved, w.s.drivers.Capabilities(w.spec.Kind).RuntimeContext, w.ports, r.Env)
	if err != nil {
		w.release()
		return nil, err
	}
	r.Task.Args, r.Task.Env, r.Task.Files = health.WithWatchdogPID(pl.Args, pl.Env, w.spec.Health), pl.Env, pl.Files
	p, err := r.Driver.Start(w.s.ctx, &r.Task)
	// The child holds its own descriptor of its output, and its command
	// line, environment and files are its own now: the run, kept for its
	// whole life, keeps none of them.
	_ = r.Task.Log.Close()
	r.Task.Log = nil
	r.Task.Args, r.Task.Env, r.Task.Files = nil, nil, nil
	if err != nil {
		w.release()
		return nil, err
	}
	return p, nil
}

// noteStartFailure records why a run could not start, in the state and in
// the workload's own log where `flyd logs` shows it.
func (w *workload) noteStartFailure(err error) {
	w.log.Warn("start failed", zap.Error(err))
	w.update(func(v *status.Workload) { v.LastError = err.Error() })
	w.publish(status.Event{Type: status.EventError, Message: err.Error()})
	if lerr := w.s.logs.Log(w.name).Append([]byte(fmt.Sprintf("flyd: start failed: %v\n", err))); lerr != nil {
		w.log.Warn("cannot write the start failure to the log", zap.Error(lerr))
	}
}

// saveRun records the current run for a later daemon, with what its
// hooks keep of it.
func (w *workload) saveRun() {
	if w.proc == nil || w.run == nil {
		return
	}
	restarts := w.view.Load().Restarts
	if err := w.s.store.SaveRun(w.name, records.Run{Process: w.proc.State(), Restarts: restarts, Kept: w.run.Kept}); err != nil {
		w.log.Error("cannot persist run state", zap.Error(err))
	}
}

// finish takes the ended run's exit and forgets the run: its hooks
// release what it held (its last lines are in its log before anyone hears
// that it ended: a reader told of a failure finds why).
func (w *workload) finish() driver.Exit {
	exit := w.proc.Exit()
	w.release()
	if r, ok := w.proc.(driver.Reaped); ok {
		w.lastRun = r.Reaped()
	}
	w.proc = nil
	_ = w.s.store.RemoveRun(w.name)
	shown := wireExit(exit)
	w.update(func(v *status.Workload) {
		v.PID, v.ContainerID, v.Healthy = 0, "", nil
		v.LastExit = shown
	})
	w.publish(status.Event{Type: status.EventExit, Message: exit.String(), Exit: wireExit(exit)})
	return exit
}

// wireExit is an exit as the API shows it.
func wireExit(e driver.Exit) *status.Exit {
	return &status.Exit{Code: e.Code, Signal: e.Signal, At: e.At, Unknown: e.Unknown, Reason: e.Reason, Description: e.String()}
}

// onExit handles a run that ended on its own.
func (w *workload) onExit() {
	exit := w.finish()
	w.log.Info("run ended", zap.String("exit", exit.String()))
	w.afterExit(exit)
}

// afterExit applies the restart policy to an ended run.
func (w *workload) afterExit(exit driver.Exit) {
	if !w.desired {
		w.halt(status.Stopped, "")
		return
	}
	switch w.spec.Restart.Policy {
	case spec.RestartAlways:
	case spec.RestartOnFailure:
		if exit.Success() {
			w.halt(status.Exited, exit.String())
			return
		}
	default:
		w.halt(status.Exited, exit.String())
		return
	}
	w.scheduleRestart(exit.String())
}

func (w *workload) scheduleRestart(reason string) {
	r := w.spec.Restart
	now := time.Now()
	n := w.failures.Add(now, r.Window.Duration)
	if r.MaxRestarts >= 0 && n > r.MaxRestarts {
		w.halt(status.Failed, fmt.Sprintf("gave up after %d restarts within %s; last: %s", r.MaxRestarts, r.Window.Duration, reason))
		return
	}
	d := backoff.Policy{Initial: r.Backoff.Initial.Duration, Max: r.Backoff.Max.Duration}.Delay(n)
	w.after(d, w.restart)
	next := now.Add(d)
	w.update(func(v *status.Workload) { v.NextStart = &next })
	w.setState(status.Backoff, fmt.Sprintf("%s; restarting in %s", reason, d.Round(time.Millisecond)))
}

// restart starts the run a backoff waited for.
func (w *workload) restart() { w.startAgain("") }

// startAgain counts a restart and starts the next run. The count and the
// state starting change in one update: no reader sees the new count on a
// workload still shown stopping or in backoff.
func (w *workload) startAgain(why string) {
	var n int
	w.update(func(v *status.Workload) {
		v.Restarts++
		n = v.Restarts
		v.State, v.Reason, v.Since = status.Starting, "", time.Now()
	})
	msg := fmt.Sprintf("restart #%d", n)
	if why != "" {
		msg += ": " + why
	}
	w.publish(status.Event{Type: status.EventRestart, Message: msg})
	w.start()
}

// halt puts the workload in a state where nothing runs and nothing will
// until a user starts it, and remembers that across daemon restarts; the
// error says it could not remember.
func (w *workload) halt(st status.State, reason string) error {
	w.cancelTimer()
	w.desired = false
	if st == status.Failed {
		w.update(func(v *status.Workload) { v.LastError = reason })
	}
	st, reason = w.restScheduled(st, reason)
	err := w.persist(st, reason)
	w.setState(st, reason)
	return err
}

// stopRun ends the current run with the spec's stop: the stop signal to
// every process of it, the grace period, then SIGKILL to all of them.
func (w *workload) stopRun() error { return w.stopWithin(w.spec.Stop.Timeout.Duration) }

// stopWithin ends the current run, killing it once grace has passed (at
// once for 0), or as soon as someone cuts the stop short (killStopNow).
func (w *workload) stopWithin(grace time.Duration) error {
	if err := w.adoptPending(); err != nil {
		return err
	}
	w.cancelTimer()
	if w.proc == nil {
		return nil
	}
	w.stopHealth()
	select {
	case <-w.killNow: // meant for a stop that ended before it looked
	default:
	}
	// Stopping before it says so: whoever sees the state stopping and
	// overtakes (a kill) is then always heard.
	w.stopping.Store(true)
	defer w.stopping.Store(false)
	w.setState(status.Stopping, "")
	if grace > 0 && w.stopGently(grace) {
		w.finish()
		return nil
	}
	_ = w.proc.Kill()
	select {
	case <-w.proc.Done():
	case <-time.After(killWait):
		return fmt.Errorf("workload %s did not end %s after SIGKILL", w.name, killWait)
	}
	w.finish()
	return nil
}

// stopGently asks the run to end, by the spec's stop command and then
// its signal (or the signal alone), and says whether it ended within
// grace; false when grace is over or the stop was overtaken.
func (w *workload) stopGently(grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	switch w.stopCommand(deadline) {
	case stopEnded:
		return true
	case stopOvertaken:
		return false
	}
	sig, err := spec.ParseSignal(w.spec.Stop.Signal)
	if err != nil {
		sig = syscall.SIGTERM
	}
	signal := w.proc.Signal
	if w.spec.Stop.Mode == spec.StopMain {
		signal = w.proc.SignalMain
	}
	if err := signal(sig); err != nil {
		w.log.Warn("stop signal failed", zap.Error(err))
	}
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-w.proc.Done():
		return true
	case <-t.C:
		w.log.Info("grace period over, killing", zap.Duration("timeout", grace))
	case <-w.killNow:
		w.log.Info("stop overtaken, killing")
	}
	return false
}

// killStopNow makes a stop in progress kill at once. It is called from
// outside the loop, which is busy with that stop; it does nothing when no
// stop is in progress.
func (w *workload) killStopNow() {
	if !w.stopping.Load() {
		return
	}
	select {
	case w.killNow <- struct{}{}:
	default:
	}
}
