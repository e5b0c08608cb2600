package supervisor

import (
	"fmt"
	"strconv"
	"syscall"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// startHealth starts checking the current run, when the spec has a check.
// Verdicts come back to the loop as commands; a verdict of a monitor
// stopped since is ignored.
func (w *workload) startHealth() {
	h := w.spec.Health
	if h == nil {
		return
	}
	probe, err := w.probe()
	if err != nil {
		w.log.Warn("no health check", zap.Error(err))
		return
	}
	w.healthGen++
	gen := w.healthGen
	cfg := health.Config{Interval: h.Interval.Duration, Timeout: h.Timeout.Duration, Failures: h.Failures, StartPeriod: h.StartPeriod.Duration}
	w.monitor = health.Start(probe, cfg, func(ok bool, err error) {
		// Never wait on the loop from here: the loop may be stopping this
		// very monitor.
		go func() {
			_ = w.call(w.s.ctx, func() error { w.healthChanged(gen, ok, err); return nil })
		}()
	})
}

func (w *workload) stopHealth() {
	w.healthGen++
	if w.monitor != nil {
		w.monitor.Stop()
		w.monitor = nil
	}
	w.update(func(v *api.Workload) { v.Healthy = nil })
}

// probe builds the check of the spec for the run: inside the workload's
// network, an exec check in its cgroup too, with its environment.
func (w *workload) probe() (health.Probe, error) {
	h := w.spec.Health
	nw, err := w.s.network(w.spec.Network)
	if err != nil {
		return nil, err
	}
	port := func(ep string) (string, error) {
		for _, p := range w.ports {
			if p.Endpoint == ep {
				return strconv.Itoa(p.Port), nil
			}
		}
		return "", fmt.Errorf("health check names endpoint %q, which has no port", ep)
	}
	switch {
	case h.TCP != "":
		p, err := port(h.TCP)
		if err != nil {
			return nil, err
		}
		return health.TCP(nw, "127.0.0.1:"+p), nil
	case h.HTTP != nil:
		p, err := port(h.HTTP.Endpoint)
		if err != nil {
			return nil, err
		}
		return health.HTTP(nw, "http://127.0.0.1:"+p+h.HTTP.Path, h.HTTP.Expect), nil
	}
	used, err := w.s.usedEndpoints(w.spec, false)
	if err != nil {
		return nil, err
	}
	resolved, err := w.s.withReferences(w.spec, false)
	if err != nil {
		return nil, err
	}
	pl, err := makePlan(resolved, w.ports, used)
	if err != nil {
		return nil, err
	}
	var cg *sandbox.Cgroup
	if w.s.cfg.Cgroups != nil {
		cg, _ = w.s.cfg.Cgroups.Open(w.name)
	}
	cred, err := probeCredential(w.spec)
	if err != nil {
		return nil, err
	}
	return health.Exec(nw, cg, cred, h.Exec, pl.env), nil
}

// probeCredential is who an exec check runs as: the workload's user, so
// that a check never has more than the workload it checks. A containerd
// workload's user lives in its image, not on the host: its checks run as
// nobody.
func probeCredential(sp *spec.Workload) (*syscall.Credential, error) {
	switch {
	case sp.User == "":
		return nil, nil
	case sp.Kind == spec.KindContainerd:
		return &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}, nil
	}
	a, err := execenv.Lookup(sp.User)
	if err != nil {
		return nil, fmt.Errorf("health check user %q: %w", sp.User, err)
	}
	return a.Credential(), nil
}

// nobody is the uid and gid of the account with no rights.
const nobody = 65534

// healthChanged records a verdict: in the state, the events and the
// registry; a healthy workload may let its dependents start; an unhealthy
// one is restarted when its spec asks for it.
func (w *workload) healthChanged(gen int, ok bool, err error) {
	if gen != w.healthGen || w.proc == nil {
		return
	}
	w.update(func(v *api.Workload) { v.Healthy = &ok })
	msg := "healthy"
	if !ok {
		msg = "unhealthy"
		if err != nil {
			msg += ": " + err.Error()
		}
	}
	w.log.Info("health", zap.Bool("healthy", ok), zap.Error(err))
	w.publish(api.Event{Type: api.EventHealth, State: api.StateRunning, Message: msg})
	w.publishInstances(api.StateRunning)
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
	w.update(func(v *api.Workload) { v.Restarts++; n = v.Restarts })
	w.publish(api.Event{Type: api.EventRestart, Message: fmt.Sprintf("restart #%d: unhealthy", n)})
	w.start()
}
