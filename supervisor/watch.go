package supervisor

// Watch: a workload's watch entries (spec.Watch), while its spec says
// watching (flyd up --watch), restart it, rebuild and restart it, or copy
// files into its container when files under their paths change. devwatch
// watches and waits for a burst to settle; what an action does to the run
// is done here, on the workload's loop, as any command. What takes long (a
// build, a copy) is not, so that a stop or a removal is never held up by
// it. The loop arms the watch when it sees a spec that watches (rewatch,
// at each turn: a pointer compared) and disarms it when the spec changes
// and when the loop ends, waiting for its goroutines (devwatch.Follower):
// no watch outlives its workload.

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/devwatch"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// armedWatch is devwatch's Actions on a workload, for the watch armed
// for one of its specs (w.watch, a devwatch.Follower the loop keeps).
type armedWatch struct{ w *workload }

// rewatch makes the watch follow the spec, on the loop: armed for a spec
// that watches, disarmed for one that does not, once per spec (an event
// says so when it stops watching).
func (w *workload) rewatch() {
	if !w.watch.Stale(w.spec) {
		return
	}
	onFreshStack(func() {
		act := func() devwatch.Actions { return &armedWatch{w} }
		if w.watch.Follow(w.s.ctx, w.spec, act, w.s.log.With(zap.String("workload", w.name))) {
			w.publish(status.Event{Type: status.EventWatch, Message: "not watching any more"})
		}
	})
}

// onLoop runs f on the workload's loop while this watch is armed.
func (a *armedWatch) onLoop(ctx context.Context, f func() error) error {
	err := a.w.call(ctx, func() error {
		if !a.w.watch.Armed(a) {
			return devwatch.ErrGone
		}
		return f()
	})
	if errors.Is(err, errRemoved) {
		return devwatch.ErrGone
	}
	return err
}

// Say publishes a watch event of the workload.
func (a *armedWatch) Say(msg string) {
	a.w.publish(status.Event{Type: status.EventWatch, Message: msg})
}

// Restart replaces the run, on the loop.
func (a *armedWatch) Restart(ctx context.Context) (did string, err error) {
	err = a.onLoop(ctx, func() error {
		did = a.w.restartForWatch()
		return nil
	})
	return did, err
}

// Command is argv as reload's exec runs it: made on the loop, run off it.
func (a *armedWatch) Command(ctx context.Context, argv []string) (run func(context.Context) error, skip string, err error) {
	w := a.w
	err = a.onLoop(ctx, func() error {
		if st := w.snapshot(false).State; st == status.Stopped {
			skip = "nothing done: " + w.name + " is stopped (flyd start runs it again)"
			return nil
		}
		p, err := w.command(argv)
		if err != nil {
			return err
		}
		run = p.Check
		return nil
	})
	return run, skip, err
}

// Log writes a line into the workload's log, on the loop.
func (a *armedWatch) Log(ctx context.Context, line string) {
	_ = a.onLoop(ctx, func() error {
		if err := a.w.s.logs.Log(a.w.name).Append([]byte(line + "\n")); err != nil {
			a.w.log.Warn("cannot write the watch's line to the log", zap.Error(err))
		}
		return nil
	})
}

// Root opens the running container's root through /proc/PID/root, on the
// loop while the run is alive: the descriptor is that container's root
// whatever becomes of the pid.
func (a *armedWatch) Root(ctx context.Context) (int, error) {
	root := -1
	err := a.onLoop(ctx, func() error {
		proc := a.w.proc
		if proc == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return nil
		default:
		}
		pid := proc.State().PID
		if pid <= 0 {
			return nil
		}
		var err error
		root, err = devwatch.OpenRoot(pid)
		return err
	})
	return root, err
}

// restartForWatch replaces the run, on the loop, unless the workload was
// stopped by request: a workload that failed, exited or waits to be
// restarted is started, since what changed may be its fix.
func (w *workload) restartForWatch() string {
	if st := w.snapshot(false).State; st == status.Stopped {
		return "nothing done: " + w.name + " is stopped (flyd start runs it again)"
	}
	if err := w.stopRun(); err != nil {
		return "restart failed: " + err.Error()
	}
	if err := w.userStart(); err != nil {
		return "restart failed: " + err.Error()
	}
	switch v := w.snapshot(false); {
	case v.State == status.Running:
		return fmt.Sprintf("restarted (pid %d)", v.PID)
	case v.Reason != "":
		return "restarted: " + string(v.State) + " (" + v.Reason + ")"
	default:
		return "restarted: " + string(v.State)
	}
}

// setWatching takes sp, the workload's spec with watching turned on or
// off, without touching the run: recorded, then armed or disarmed at the
// loop's next turn.
func (w *workload) setWatching(sp *spec.Workload) error {
	old := w.spec
	v := w.snapshot(false)
	w.setSpec(sp, w.ports)
	if err := w.persist(v.State, v.Reason); err != nil {
		w.setSpec(old, w.ports)
		return err
	}
	return nil
}
