package supervisor

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/wiring"
)

// execIn is argv run for the workload as its exec check is: inside its
// network and cgroup, seeing what its run sees in place of the host's
// (its mounts: the network's /etc/hosts, the project's /dev/shm, its own
// /tmp), as its user, with its environment.
func (w *workload) execIn(nw *sandbox.Network, argv []string) (health.Probe, error) {
	return w.execWith(nw, argv, true)
}

// execWith is execIn, in the workload's cgroup or not.
func (w *workload) execWith(nw *sandbox.Network, argv []string, inCgroup bool) (health.Probe, error) {
	resolved, used, err := w.s.wire(w.spec, w.by, false)
	if err != nil {
		return nil, err
	}
	pl, err := wiring.PlanRun(resolved, w.s.drivers.Capabilities(w.spec.Kind).RuntimeContext, w.ports, used)
	if err != nil {
		return nil, err
	}
	if argv, err = pl.Expand("exec", argv); err != nil {
		return nil, err
	}
	var cg *sandbox.Cgroup
	if inCgroup && w.s.cfg.Cgroups != nil {
		cg, _ = w.s.cfg.Cgroups.Open(w.name)
	}
	cred, err := health.Credential(w.spec.User, w.s.drivers.Capabilities(w.spec.Kind).ImageUser)
	if err != nil {
		return nil, err
	}
	dir := "" // values by file reach the command through the run's own files
	if w.proc != nil {
		dir = w.proc.State().CarrierDir
	}
	env, err := pl.CommandEnv(dir)
	if err != nil {
		return nil, err
	}
	if ex, ok := w.proc.(driver.Execer); ok {
		// A container's: inside it, with the image's programs.
		return health.Inside(ex, argv, env), nil
	}
	var m sandbox.Mounts
	if w.run != nil {
		m = w.run.Task.Mounts
	}
	return health.Exec(nw, cg, m, cred, argv, env), nil
}

// command is argv run for the workload as execIn runs it, inside its
// network.
func (w *workload) command(argv []string) (health.Probe, error) {
	nw, err := w.s.net.Namespace(w.spec.Network)
	if err != nil {
		return nil, err
	}
	return w.execIn(nw, argv)
}

// stopOutcome is what a stop command left to do.
type stopOutcome int

const (
	stopSignal    stopOutcome = iota // the run goes on: the stop signal follows
	stopEnded                        // the run ended: no signal
	stopOvertaken                    // kill at once
)

// stopSettle is how long a run whose stop command succeeded has to end
// before the stop signal follows: the kernel tells a program's clients
// it is gone (its sockets closed) a moment before it tells its parent.
const stopSettle = 500 * time.Millisecond

// stopCommand runs the spec's stop command, if it has one, within
// deadline, and says what it left to do. The command runs as a reload
// command does, in the workload's network, as its user, with its
// environment, but outside its cgroup: the run's end kills every process
// of its cgroup, and the command would die with what it stops. Its
// outcome, how long it took and whether the signal follows, is told in a
// state event (stopping) and in the workload's log.
func (w *workload) stopCommand(deadline time.Time) stopOutcome {
	argv := w.spec.Stop.Exec
	if len(argv) == 0 {
		return stopSignal
	}
	begun := time.Now()
	nw, err := w.s.net.Namespace(w.spec.Network)
	var p health.Probe
	if err == nil {
		p, err = w.execWith(nw, argv, false)
	}
	if err == nil {
		ctx, cancel := context.WithDeadline(w.s.ctx, deadline)
		res := make(chan error, 1)
		go func() { res <- p.Check(ctx) }()
		select {
		case err = <-res:
		case <-w.killNow:
			cancel()
			<-res
			w.tellStop(fmt.Sprintf("stop command %s overtaken after %s: killing", argv[0], time.Since(begun).Round(time.Millisecond)))
			return stopOvertaken
		}
		cancel()
	}
	took := time.Since(begun).Round(time.Millisecond)
	ended := false
	settle := time.NewTimer(0)
	if err == nil {
		settle.Reset(min(stopSettle, max(time.Until(deadline), 0)))
	}
	select {
	case <-w.proc.Done():
		ended = true
	case <-settle.C:
		select {
		case <-w.proc.Done():
			ended = true
		default:
		}
	}
	settle.Stop()
	what := fmt.Sprintf("stop command %s exited 0 after %s", argv[0], took)
	if err != nil {
		what = fmt.Sprintf("stop command %s failed after %s: %v", argv[0], took, err)
	}
	switch {
	case ended:
		w.tellStop(what + "; the run ended, no signal needed")
		return stopEnded
	case time.Now().After(deadline):
		w.tellStop(what + "; stop.timeout is over: killing")
		return stopOvertaken
	}
	w.tellStop(fmt.Sprintf("%s; the run goes on: %s follows", what, w.spec.Stop.Signal))
	return stopSignal
}

// tellStop says how a stop goes: in a state event and in the log.
func (w *workload) tellStop(msg string) {
	w.log.Info("stop", zap.String("how", msg))
	w.update(func(v *status.Workload) { v.Reason = msg })
	w.publish(status.Event{Type: status.EventState, State: status.Stopping, Message: msg})
	if err := w.s.logs.Log(w.name).Append([]byte("flyd: " + msg + "\n")); err != nil {
		w.log.Warn("cannot write the stop's outcome to the log", zap.Error(err))
	}
}

// reloadTimeout bounds a reload command.
const reloadTimeout = 30 * time.Second

// reload has the running workload take its configuration again, as its
// spec's reload says: a signal to its main process, or a command.
func (w *workload) reload() error {
	r := w.spec.Reload
	switch {
	case r == nil:
		return fmt.Errorf("%w: workload %s has no reload in its spec (reload: {signal: HUP} or {exec: [...]})", errdefs.ErrConflict, w.name)
	case w.proc == nil:
		return fmt.Errorf("%w: workload %s is not running", errdefs.ErrConflict, w.name)
	}
	how := "signal " + r.Signal
	var err error
	if r.Signal != "" {
		sig, _ := spec.ParseSignal(r.Signal) // validated
		err = w.proc.SignalMain(sig)
	} else {
		how = "command " + r.Exec[0]
		var p health.Probe
		if p, err = w.command(r.Exec); err == nil {
			ctx, cancel := context.WithTimeout(w.s.ctx, reloadTimeout)
			err = p.Check(ctx)
			cancel()
		}
	}
	if err != nil {
		w.publish(status.Event{Type: status.EventReload, Message: "reload by " + how + " failed: " + err.Error()})
		return fmt.Errorf("reload of %s by %s: %w", w.name, how, err)
	}
	w.log.Info("reloaded", zap.String("by", how))
	w.publish(status.Event{Type: status.EventReload, Message: "reloaded by " + how})
	return nil
}
