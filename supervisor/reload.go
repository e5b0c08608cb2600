package supervisor

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/wiring"
)

// execIn is argv run for the workload as its exec check is: inside its
// network and cgroup, as its user, with its environment.
func (w *workload) execIn(nw *sandbox.Network, argv []string) (health.Probe, error) {
	resolved, used, err := w.s.wire(w.spec, w.by, false)
	if err != nil {
		return nil, err
	}
	pl, err := wiring.PlanRun(resolved, w.s.drivers.Capabilities(w.spec.Kind).RuntimeContext, w.ports, used)
	if err != nil {
		return nil, err
	}
	var cg *sandbox.Cgroup
	if w.s.cfg.Cgroups != nil {
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
	return health.Exec(nw, cg, cred, argv, env), nil
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
