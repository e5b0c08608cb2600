package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/backoff"
	"github.com/flyd-dev/flyd/devwatch"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/schedule"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// killWait bounds the wait for a run to end after SIGKILL.
const killWait = 10 * time.Second

var errRemoved = errors.New("workload removed")

// workload is one workload's lifecycle, owned by its loop goroutine. Every
// field but the atomic ones is touched only by that goroutine; view is
// what readers see.
type workload struct {
	s    *Supervisor
	name string
	// group is the group it is a replica of (replicas.go), or "".
	group string
	log   workloadLog

	cmds   chan func()
	exited chan struct{}
	// killNow tells a stop in progress to kill at once: the loop is busy
	// with it and reads no command until it ends. stopping says one is
	// in progress: stored by the loop (stop), loaded by the goroutine of
	// a kill that would overtake it.
	killNow  chan struct{}
	stopping atomic.Bool

	spec *spec.Workload
	// full is spec for other goroutines, its secrets unredacted: stored
	// by the loop whenever spec changes (setSpec), loaded by any.
	full    atomic.Pointer[spec.Workload]
	owner   string
	by      uint32 // the uid of the caller that applied it
	ports   []status.PortMapping
	desired bool
	proc    driver.Process
	// lastRun, from the run that ended last, is closed once its pid is
	// free (driver.Reaped); the next run waits for it.
	lastRun <-chan struct{}
	// timer, when set, runs due on the loop: a restart after backoff, or
	// another attempt at adopting an earlier daemon's run.
	timer *time.Timer
	due   func()
	sched *schedule.Timer // spec.Schedule's times (schedule.go)
	// unadopted is the record of an earlier daemon's run that could not be
	// adopted yet: while it is set the run may be alive, so none is started.
	unadopted  *records.Run
	adoptTries int
	failures   backoff.Window
	gone       bool
	// health keeps the checks of the current run (health.go); nil until
	// a spec of the workload has checks (hooks).
	health *health.Hook
	// createErr is the outcome of create, read by the Put that created
	// the workload.
	createErr error
	// run is the current run as its hooks hold it (hooks.go): set from
	// their Prestart or Adopt to their Exited.
	run *runhook.Run
	// watch is the watch of its spec's watch entries (watch.go).
	watch devwatch.Follower
	// member, while the loop runs a batch's command, records the state
	// the command leaves with the batch's others (records.Group).
	member *records.Member

	// view is what readers see, copied on write (update): a view once
	// stored never changes, nor does anything it points to, so a reader
	// holds one without a lock.
	view atomic.Pointer[status.Workload]
}

func (w *workload) loop(first func(*workload)) {
	defer w.s.wg.Done()
	defer close(w.exited)
	defer w.watch.Stop()
	if first != nil {
		onFreshStack(func() { first(w) })
	}
	for !w.gone {
		w.rewatch()
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
			onFreshStack(f)
		case <-w.sched.C():
			onFreshStack(w.onSchedule)
		case <-done:
			onFreshStack(w.onExit)
		case <-due:
			f := w.due
			w.timer, w.due = nil, nil
			onFreshStack(f)
		}
	}
}

// onFreshStack runs f on a goroutine of its own and waits for it: still
// one step of the loop at a time, but the deep calls of a start or a stop
// grow that goroutine's stack, which goes when it ends, and not the
// loop's, which every idle workload keeps (Go shrinks a stack only at a
// collection, and only by half).
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
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
	return w.await(ctx, reply)
}

// callLater hands f to the loop and returns what waits for its error. A
// loop that is idle takes f at once, so a batch can set every workload
// going before it waits for the first; a busy one gets f from a goroutine
// of its own, as call would.
func (w *workload) callLater(ctx context.Context, f func() error) (wait func() error) {
	reply := make(chan error, 1)
	select {
	case w.cmds <- func() { reply <- f() }:
		return func() error { return w.await(ctx, reply) }
	case <-w.exited:
		return func() error { return errRemoved }
	default:
	}
	go func() { reply <- w.call(ctx, f) }()
	return func() error { return <-reply }
}

// await waits for the error of a command the loop has taken.
func (w *workload) await(ctx context.Context, reply <-chan error) error {
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

func (w *workload) result(err error) (*status.Workload, error) {
	if err != nil {
		return nil, err
	}
	v := w.snapshot(true)
	return &v, nil
}

func (w *workload) snapshot(withSpec bool) status.Workload {
	v := *w.view.Load()
	if !withSpec {
		v.Spec = nil
	}
	return v
}

// specNow is the workload's spec with its secrets, for what another
// goroutine must give a consumer of it (its secret configuration).
func (w *workload) specNow() *spec.Workload { return w.full.Load() }

// update stores a new view: f changes a copy of the one in force. The
// loop is not the only writer (the limit watcher and a notify socket's
// refusals are others): a copy another write overtook is made again from
// that write's, so f may run more than once and must only set v's fields,
// never change what they point to.
func (w *workload) update(f func(v *status.Workload)) {
	for {
		old := w.view.Load()
		v := *old
		f(&v)
		if w.view.CompareAndSwap(old, &v) {
			return
		}
	}
}

func (w *workload) publish(ev status.Event) {
	ev.Workload = w.name
	ev.By = w.view.Load().AppliedBy
	w.s.publish(ev)
}

// A state set again, with a new reason (a pull's progress while
// preparing), keeps the time it was entered.
func (w *workload) setState(st status.State, msg string) { w.setStateSince(st, msg, time.Time{}) }

// setStateSince is setState for a state entered at another moment than
// now (an adopted run's start): state and time change in one update, so no
// reader sees the one without the other.
func (w *workload) setStateSince(st status.State, msg string, since time.Time) {
	var was status.State
	w.update(func(v *status.Workload) {
		was = v.State
		switch {
		case !since.IsZero():
			v.Since = since
		case was != st || v.Since.IsZero():
			v.Since = time.Now()
		}
		v.State, v.Reason = st, msg
		if st != status.Backoff {
			v.NextStart = w.sched.Next()
		}
	})
	w.publishInstances(st)
	switch st {
	case status.Running, status.Exited, status.Failed, status.Scheduled:
		// What waits for it may start now, or learn it never will.
		w.s.kickDependents(w.name)
	}
	if was == status.Running && st != status.Running {
		w.s.stopFollowers(w.name)
	}
	w.log.Info("state", zap.String("state", string(st)), zap.String("reason", msg))
	w.publish(status.Event{Type: status.EventState, State: st, Message: msg})
}

func (w *workload) setSpec(sp *spec.Workload, ports []status.PortMapping) {
	w.spec, w.ports = sp, ports
	w.full.Store(sp)
	red := sp.Redacted()
	w.update(func(v *status.Workload) {
		v.Kind = sp.Kind
		v.Spec = red
		v.Checked, v.Disabled = sp.Health != nil, sp.Disabled
		v.Ports = ports
	})
}

// networkName is the workload's network, for readers outside the loop.
func (w *workload) networkName() string {
	return w.view.Load().Spec.Network
}

// completed says whether the workload is at rest after a run that exited
// 0: a one-shot done.
func (w *workload) completed() bool {
	v := w.snapshot(false)
	return v.State == status.Exited && v.LastExit.Succeeded()
}

// persist writes the desired state. A workload at rest records why, and
// how its last run ended.
// What cannot be recorded is logged, and returned to a caller that asked
// for the change, which must not be told it is done.
func (w *workload) persist(rest status.State, reason string) error {
	v := w.view.Load()
	rec := records.Workload{Spec: w.spec, Running: w.desired, Owner: w.owner, By: w.by, ScheduledThrough: w.sched.Through()}
	if !w.desired {
		rec.Rest, rec.LastError, rec.Reason = rest, v.LastError, reason
		rec.StartedAt, rec.LastExit, rec.Restarts = v.StartedAt, events.RecordExit(v.LastExit), v.Restarts
	}
	save := w.s.store.SaveWorkload
	if m := w.member; m != nil {
		save, w.member = m.SaveWorkload, nil
	}
	if err := save(rec); err != nil {
		w.log.Error("cannot persist desired state", zap.Error(err))
		return fmt.Errorf("cannot record the desired state of %s (a daemon restart would undo this change): %w", w.name, err)
	}
	return nil
}

// after runs f on the loop once d has passed, instead of anything
// scheduled before.
func (w *workload) after(d time.Duration, f func()) {
	w.cancelTimer()
	w.timer, w.due = time.NewTimer(d), f
}

func (w *workload) cancelTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer, w.due = nil, nil
	}
}

// create persists a new workload and starts it (or leaves it stopped). A
// workload whose spec cannot be persisted does not exist, and holds no
// port: released before it is forgotten, so that an apply racing it sees
// it gone only once its ports are free to assign again.
func (w *workload) create(start bool, owner string, by uint32) error {
	w.desired, w.owner, w.by = start, owner, by
	w.update(func(v *status.Workload) { v.Owner, v.AppliedBy = owner, by })
	w.boundLog(by)
	if err := w.s.store.SaveWorkload(records.Workload{Spec: w.spec, Running: start, Rest: status.Stopped, Owner: owner, By: by}); err != nil {
		w.s.net.Detach(w.spec)
		w.gone = true
		w.s.forget(w)
		w.s.net.Drop(w.spec.Network) // no longer in use
		return fmt.Errorf("cannot record workload %s, so it is not created: %w", w.name, err)
	}
	w.s.quarantine.Lift(w.name) // its record is this one now
	if start && w.scheduled() {
		return w.armAtApply()
	}
	if start {
		w.start()
	} else {
		w.setState(status.Stopped, "")
	}
	return nil
}

func (w *workload) userStart() error {
	was := w.desired
	w.desired = true
	w.armAtStart()
	if err := w.persist("", ""); err != nil {
		w.desired = was
		return err
	}
	if w.proc != nil {
		return nil
	}
	w.failures.Reset()
	w.start()
	return nil
}

// userStop stops the workload with the spec's grace period, or with
// kill, at once.
func (w *workload) userStop(kill bool) error {
	if err := w.adoptPending(); err != nil {
		return err
	}
	w.desired = false
	grace, reason := w.spec.Stop.Timeout.Duration, "stopped by request"
	if kill {
		grace, reason = 0, "killed by request"
	}
	if err := w.stopWithin(grace); err != nil {
		return err
	}
	return w.halt(status.Stopped, reason)
}

func (w *workload) signal(sig syscall.Signal) error {
	if err := w.adoptPending(); err != nil {
		return err
	}
	if w.proc == nil {
		return fmt.Errorf("%w: workload %s is not running", errdefs.ErrConflict, w.name)
	}
	return w.proc.Signal(sig)
}

// replace applies a new spec. An equal spec changes nothing but may start
// a workload that is not running: apply means "make it so".
func (w *workload) replace(sp *spec.Workload, ports []status.PortMapping, start bool, by uint32) error {
	if spec.OnlyWatchingDiffers(w.spec, sp) && status.SamePorts(w.ports, ports) {
		if err := w.setWatching(sp); err != nil {
			return err
		}
	}
	// An equal spec whose ports moved (a hashing rule that changed) is a
	// change: the run must take its new ports.
	if spec.Equal(w.spec, sp) && status.SamePorts(w.ports, ports) {
		// Applying the same spec again changes nothing: a one-shot that
		// completed stays completed (start or restart runs it again on
		// purpose); anything else at rest is started.
		if start && w.scheduled() {
			return w.armIfDisarmed()
		}
		if start && w.proc == nil && w.timer == nil && !w.completed() {
			return w.userStart()
		}
		return nil
	}
	// Recorded first: a replacement that cannot be made durable is
	// refused before the running one is touched.
	rec := records.Workload{Spec: sp, Running: start, Owner: w.owner, By: by, Rest: status.Stopped}
	if err := w.s.store.SaveWorkload(rec); err != nil {
		return fmt.Errorf("cannot record the new spec of %s, so it is not replaced: %w", w.name, err)
	}
	w.by = by
	w.update(func(v *status.Workload) { v.AppliedBy = by })
	w.boundLog(by)
	if err := w.stopRun(); err != nil {
		return err
	}
	old := w.spec.Network
	w.setSpec(sp, ports)
	w.s.trackDependent(w, sp)
	// The host's table now holds what the new spec publishes, if it left
	// the host; the old network's reservations go.
	if old != sp.Network && old != spec.NetworkHost {
		w.s.net.Release(w.name, old)
	}
	w.failures.Reset()
	// What the old spec's runs did says nothing of the new one's.
	w.update(func(v *status.Workload) { v.Restarts, v.LastExit, v.LastError = 0, nil, "" })
	w.publish(status.Event{Type: status.EventApplied, Message: "replaced"})
	if start {
		return w.applyStart()
	}
	return w.halt(status.Stopped, "replaced")
}

// remove stops the workload and deletes all it owns: its spec, its run
// record, its logs.
func (w *workload) remove() error {
	if err := w.adoptPending(); err != nil {
		return err
	}
	w.desired = false
	if err := w.stopRun(); err != nil {
		return err
	}
	_ = w.s.store.RemoveRun(w.name)
	if err := w.s.store.RemoveWorkload(w.name); err != nil {
		return err
	}
	w.gone = true
	w.watch.Stop() // before the removal is answered: a down leaves no watch
	w.s.forget(w)
	if err := w.s.drivers.Forget(w.s.ctx, w.spec.Kind, w.name); err != nil {
		w.log.Warn("the runtime could not release what it kept for the workload", zap.Error(err))
	}
	w.s.hooks.Destroy(w.s.ctx, w.name)
	w.s.net.Detach(w.spec)
	w.publish(status.Event{Type: status.EventRemoved})
	return nil
}

// workloadLog logs with the workload's name. It adds the field at each
// call instead of holding a logger of its own (zap's With encodes the
// field into a buffer the logger keeps): a workload logs a few lines a
// run, and thousands of them kept ~2 KiB each for it.
type workloadLog struct {
	l    *zap.Logger
	name string
}

func (l workloadLog) Info(msg string, fields ...zap.Field)  { l.l.Info(msg, l.with(fields)...) }
func (l workloadLog) Warn(msg string, fields ...zap.Field)  { l.l.Warn(msg, l.with(fields)...) }
func (l workloadLog) Error(msg string, fields ...zap.Field) { l.l.Error(msg, l.with(fields)...) }

func (l workloadLog) with(fields []zap.Field) []zap.Field {
	return append([]zap.Field{zap.String("workload", l.name)}, fields...)
}
