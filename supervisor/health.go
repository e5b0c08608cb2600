package supervisor

import (
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/status"
)

// newHealth is the hook that keeps w's runs' health (health.Hook): what
// it hears comes to w's loop as commands, and its verdicts are w's state.
func (w *workload) newHealth() *health.Hook {
	return health.NewHook(health.HookConfig{
		Workload:  w.name,
		Cgroups:   w.s.cfg.Cgroups,
		NotifyDir: w.s.notifyDir,
		Log:       func() *logfile.Log { return w.s.logs.Log(w.name) },
		Probe:     w.probe,
		Post: func(f func()) {
			go func() { _ = w.call(w.s.ctx, func() error { f(); return nil }) }()
		},
		Verdict: w.healthChanged,
		Ready:   w.saveRun,
		Status:  func(msg string) { w.update(func(v *status.Workload) { v.Reason = msg }) },
		Refused: func(pid int32, total, unsaid int, say bool) {
			w.update(func(v *status.Workload) { v.NotifyRefused = total })
			if say {
				w.log.Warn("notify messages from processes that are not the workload's, ignored",
					zap.Int32("pid", pid), zap.Int("since_last_said", unsaid), zap.Int("total", total))
			}
		},
		Warn: func(msg string, err error) { w.log.Warn(msg, zap.Error(err)) },
	})
}

// stopHealth stops checking the run: its health is not known any more.
func (w *workload) stopHealth() {
	if w.health != nil {
		w.health.Stop()
	}
	w.update(func(v *status.Workload) { v.Healthy = nil })
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

// healthChanged records a verdict of the run's checks: in the state, the
// events and the registry; a healthy workload may let its dependents
// start; an unhealthy one is restarted when its spec asks for it.
func (w *workload) healthChanged(ok bool, err error) {
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
	w.startAgain("unhealthy")
}
