package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/spec"
)

// killWait bounds the wait for a run to end after SIGKILL.
const killWait = 10 * time.Second

var errRemoved = errors.New("workload removed")

// workload is one workload's lifecycle, owned by its loop goroutine. Every
// field below mu is touched only by that goroutine; view is what readers
// see, under mu.
type workload struct {
	s    *Supervisor
	name string
	log  *zap.Logger

	cmds   chan func()
	exited chan struct{}

	spec     *spec.Workload
	owner    string
	ports    []api.PortMapping
	desired  bool
	proc     driver.Process
	timer    *time.Timer
	failures failureWindow
	gone     bool
	// monitor checks the run's health; healthGen tells its verdicts from
	// those of a monitor already stopped.
	monitor   *health.Monitor
	healthGen int
	// createErr is the outcome of create, read by the Put that created
	// the workload.
	createErr error

	mu   sync.Mutex
	view api.Workload
}

func (w *workload) loop(first func(*workload)) {
	defer w.s.wg.Done()
	defer close(w.exited)
	if first != nil {
		first(w)
	}
	for !w.gone {
		var done <-chan struct{}
		if w.proc != nil {
			done = w.proc.Done()
		}
		var due <-chan time.Time
		if w.timer != nil {
			due = w.timer.C
		}
		select {
		case f := <-w.cmds:
			f()
		case <-done:
			w.onExit()
		case <-due:
			w.timer = nil
			var n int
			w.update(func(v *api.Workload) { v.Restarts++; n = v.Restarts })
			w.publish(api.Event{Type: api.EventRestart, Message: fmt.Sprintf("restart #%d", n)})
			w.start()
		}
	}
}

// call runs f on the loop and returns its error. If ctx ends first the
// command still completes; only the wait is abandoned.
func (w *workload) call(ctx context.Context, f func() error) error {
	reply := make(chan error, 1)
	select {
	case w.cmds <- func() { reply <- f() }:
	case <-w.exited:
		return errRemoved
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-w.exited:
		// The loop may have taken f and run it as its last command.
		select {
		case err := <-reply:
			return err
		default:
			return errRemoved
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *workload) result(err error) (*api.Workload, error) {
	if err != nil {
		return nil, err
	}
	v := w.snapshot(true)
	return &v, nil
}

func (w *workload) snapshot(withSpec bool) api.Workload {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.view
	if !withSpec {
		v.Spec = nil
	}
	return v
}

// update changes the view under its lock.
func (w *workload) update(f func(v *api.Workload)) {
	w.mu.Lock()
	f(&w.view)
	w.mu.Unlock()
}

func (w *workload) publish(ev api.Event) {
	ev.Workload = w.name
	w.s.publish(ev)
}

func (w *workload) setState(st api.State, msg string) {
	w.update(func(v *api.Workload) {
		v.State = st
		v.Since = time.Now()
		if st != api.StateBackoff {
			v.NextStart = nil
		}
	})
	w.publishInstances(st)
	if st == api.StateRunning {
		w.s.kickDependents(w.name)
	}
	w.log.Info("state", zap.String("state", string(st)), zap.String("reason", msg))
	w.publish(api.Event{Type: api.EventState, State: st, Message: msg})
}

func (w *workload) setSpec(sp *spec.Workload, ports []api.PortMapping) {
	w.spec, w.ports = sp, ports
	red := sp.Redacted()
	w.update(func(v *api.Workload) {
		v.Kind = sp.Kind
		v.Spec = red
		v.Ports = ports
	})
}

// networkName is the workload's network, for readers outside the loop.
func (w *workload) networkName() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.Spec.Network
}

// persist writes the desired state. A workload at rest records why.
func (w *workload) persist(rest api.State) {
	w.mu.Lock()
	lastErr := w.view.LastError
	w.mu.Unlock()
	rec := specRecord{Spec: w.spec, Running: w.desired, Owner: w.owner}
	if !w.desired {
		rec.Rest, rec.LastError = rest, lastErr
	}
	if err := w.s.store.saveSpec(rec); err != nil {
		w.log.Error("cannot persist desired state", zap.Error(err))
	}
}

func (w *workload) cancelTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// start begins a run. A failure that retrying cannot fix leaves the
// workload failed at once; any other is retried by policy.
func (w *workload) start() {
	w.cancelTimer()
	if waiting := w.s.unready(w.spec.After); len(waiting) > 0 {
		// Started again when what it waits for is ready (kickDependents).
		w.setState(api.StatePending, "waiting for "+strings.Join(waiting, ", "))
		return
	}
	w.setState(api.StateStarting, "")
	p, err := w.launch()
	if err != nil {
		w.noteStartFailure(err)
		if errors.Is(err, driver.ErrExec) || errors.Is(err, errdefs.ErrInvalid) {
			w.rest(api.StateFailed, err.Error())
			return
		}
		w.scheduleRestart(err.Error())
		return
	}
	w.proc = p
	st := p.State()
	w.saveRun()
	w.update(func(v *api.Workload) {
		v.PID, v.ContainerID, v.LastError = st.PID, st.ContainerID, ""
		v.StartedAt = &st.StartedAt
	})
	w.setState(api.StateRunning, "")
	w.startHealth()
}

func (w *workload) launch() (driver.Process, error) {
	pl, err := makePlan(w.spec, w.ports)
	if err != nil {
		return nil, err
	}
	nw, err := w.s.network(w.spec.Network)
	if err != nil {
		return nil, err
	}
	cg, err := w.s.cgroup(w.spec)
	if err != nil {
		return nil, err
	}
	log, err := logfile.Open(w.s.logPath(w.name))
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	defer log.Close() // the child holds its own descriptor
	return w.s.drivers[w.spec.Kind].Start(w.s.ctx, &driver.Task{
		Workload: w.name, Spec: w.spec, Args: pl.args, Env: pl.env, Log: log,
		Files: pl.files, CarrierDir: w.s.carrierDir(w.name), Network: nw, Cgroup: cg,
	})
}

// noteStartFailure records why a run could not start, in the state and in
// the workload's own log where `flyd logs` shows it.
func (w *workload) noteStartFailure(err error) {
	w.log.Warn("start failed", zap.Error(err))
	w.update(func(v *api.Workload) { v.LastError = err.Error() })
	w.publish(api.Event{Type: api.EventError, Message: err.Error()})
	if f, ferr := logfile.Open(w.s.logPath(w.name)); ferr == nil {
		fmt.Fprintf(f, "flyd: start failed: %v\n", err)
		f.Close()
	}
}

func (w *workload) saveRun() {
	w.mu.Lock()
	restarts := w.view.Restarts
	w.mu.Unlock()
	if err := w.s.store.saveRun(w.name, runRecord{Process: w.proc.State(), Restarts: restarts}); err != nil {
		w.log.Error("cannot persist run state", zap.Error(err))
	}
}

// finish takes the ended run's exit and forgets the run.
func (w *workload) finish() driver.Exit {
	w.stopHealth()
	exit := w.proc.Exit()
	w.proc = nil
	_ = w.s.store.removeRun(w.name)
	w.update(func(v *api.Workload) {
		v.PID, v.ContainerID = 0, ""
		v.LastExit = &exit
	})
	w.publish(api.Event{Type: api.EventExit, Message: exit.String(), Exit: &exit})
	return exit
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
		w.rest(api.StateStopped, "")
		return
	}
	switch w.spec.Restart.Policy {
	case spec.RestartAlways:
	case spec.RestartOnFailure:
		if exit.Success() {
			w.rest(api.StateExited, exit.String())
			return
		}
	default:
		w.rest(api.StateExited, exit.String())
		return
	}
	w.scheduleRestart(exit.String())
}

func (w *workload) scheduleRestart(reason string) {
	r := w.spec.Restart
	now := time.Now()
	n := w.failures.add(now, r.Window.Duration)
	if r.MaxRestarts >= 0 && n > r.MaxRestarts {
		w.rest(api.StateFailed, fmt.Sprintf("gave up after %d restarts within %s; last: %s", r.MaxRestarts, r.Window.Duration, reason))
		return
	}
	d := backoff(r.Backoff.Initial.Duration, r.Backoff.Max.Duration, n, rand.Float64())
	w.timer = time.NewTimer(d)
	next := now.Add(d)
	w.update(func(v *api.Workload) { v.NextStart = &next })
	w.setState(api.StateBackoff, fmt.Sprintf("%s; restarting in %s", reason, d.Round(time.Millisecond)))
}

// rest puts the workload in a state where nothing runs and nothing will
// until a user starts it, and remembers that across daemon restarts.
func (w *workload) rest(st api.State, reason string) {
	w.cancelTimer()
	w.desired = false
	if st == api.StateFailed {
		w.update(func(v *api.Workload) { v.LastError = reason })
	}
	w.persist(st)
	w.setState(st, reason)
}

// stopRun ends the current run: the stop signal to every process of it,
// the grace period, then SIGKILL to all of them.
func (w *workload) stopRun() error {
	w.cancelTimer()
	if w.proc == nil {
		return nil
	}
	w.stopHealth()
	w.setState(api.StateStopping, "")
	sig, err := spec.ParseSignal(w.spec.Stop.Signal)
	if err != nil {
		sig = syscall.SIGTERM
	}
	if err := w.proc.Signal(sig); err != nil {
		w.log.Warn("stop signal failed", zap.Error(err))
	}
	grace := time.NewTimer(w.spec.Stop.Timeout.Duration)
	defer grace.Stop()
	select {
	case <-w.proc.Done():
	case <-grace.C:
		w.log.Info("grace period over, killing", zap.Duration("timeout", w.spec.Stop.Timeout.Duration))
		_ = w.proc.Kill()
		select {
		case <-w.proc.Done():
		case <-time.After(killWait):
			return fmt.Errorf("workload %s did not end %s after SIGKILL", w.name, killWait)
		}
	}
	w.finish()
	return nil
}

// create persists a new workload and starts it (or leaves it stopped). A
// workload whose spec cannot be persisted does not exist.
func (w *workload) create(start bool, owner string) error {
	w.desired, w.owner = start, owner
	w.update(func(v *api.Workload) { v.Owner = owner })
	if err := w.s.store.saveSpec(specRecord{Spec: w.spec, Running: start, Rest: api.StateStopped, Owner: owner}); err != nil {
		w.gone = true
		w.s.forget(w)
		return err
	}
	if start {
		w.start()
	} else {
		w.setState(api.StateStopped, "")
	}
	return nil
}

func (w *workload) userStart() error {
	if w.proc != nil {
		w.desired = true
		w.persist("")
		return nil
	}
	w.desired = true
	w.failures.reset()
	w.persist("")
	w.start()
	return nil
}

func (w *workload) userStop() error {
	w.desired = false
	if err := w.stopRun(); err != nil {
		return err
	}
	w.rest(api.StateStopped, "stopped by request")
	return nil
}

func (w *workload) signal(sig syscall.Signal) error {
	if w.proc == nil {
		return fmt.Errorf("%w: workload %s is not running", errdefs.ErrConflict, w.name)
	}
	return w.proc.Signal(sig)
}

// replace applies a new spec. An equal spec changes nothing but may start
// a workload that is not running: apply means "make it so".
func (w *workload) replace(sp *spec.Workload, ports []api.PortMapping, start bool) error {
	if spec.Equal(w.spec, sp) {
		if start && w.proc == nil && w.timer == nil {
			return w.userStart()
		}
		return nil
	}
	if err := w.stopRun(); err != nil {
		return err
	}
	old := w.spec.Network
	w.setSpec(sp, ports)
	if old != sp.Network {
		w.s.release(w.name, old)
	}
	w.failures.reset()
	w.update(func(v *api.Workload) { v.Restarts = 0 })
	w.publish(api.Event{Type: api.EventApplied, Message: "replaced"})
	if start {
		return w.userStart()
	}
	w.rest(api.StateStopped, "replaced")
	return nil
}

// remove stops the workload and deletes all it owns: its spec, its run
// record, its logs.
func (w *workload) remove() error {
	w.desired = false
	if err := w.stopRun(); err != nil {
		return err
	}
	_ = w.s.store.removeRun(w.name)
	if err := w.s.store.removeSpec(w.name); err != nil {
		return err
	}
	w.gone = true
	w.s.forget(w)
	w.s.deleteCgroup(w.name)
	w.s.release(w.name, "")
	w.s.dropNetwork(w.spec.Network)
	if err := logfile.Remove(w.s.logPath(w.name), w.s.cfg.LogGenerations); err != nil {
		w.log.Warn("cannot remove logs", zap.Error(err))
	}
	w.publish(api.Event{Type: api.EventRemoved})
	return nil
}

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
