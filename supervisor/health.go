package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/health"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
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
	var probe health.Probe // nil for notify: the program tells readiness
	verdict := w.healthChanged
	if h.Notify {
		// An adopted run said READY=1 to an earlier daemon: it does not
		// say it twice. Later messages come to a socket bound anew.
		if err := w.listenNotify(); err != nil {
			w.log.Warn("no notify socket", zap.Error(err))
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
	if h.Notify && w.ready {
		w.healthChanged(gen, true, nil)
	}
	// Every check also fails while the main process is stopped.
	probe = health.Awake(func() int { return int(w.runPID.Load()) }, probe)
	cfg := health.Config{Interval: h.Interval.Duration, Timeout: h.Timeout.Duration, Failures: h.Failures, StartPeriod: h.StartPeriod.Duration}
	w.monitor = health.Start(probe, cfg, func(ok bool, err error) {
		// Never wait on the loop from here: the loop may be stopping this
		// very monitor.
		go func() {
			_ = w.call(w.s.ctx, func() error { verdict(gen, ok, err); return nil })
		}()
	})
}

// awakeChanged is the verdict of a notify workload's check of its main
// process: stopped, it is unhealthy; running again, it is healthy if it
// has said it is ready.
func (w *workload) awakeChanged(gen int, ok bool, err error) {
	if !ok || w.ready {
		w.healthChanged(gen, ok, err)
	}
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
	w.ready = false
	w.update(func(v *status.Workload) { v.Healthy = nil })
}

// probe builds the check of the spec for the run: inside the workload's
// network, an exec check in its cgroup too, with its environment.
func (w *workload) probe() (health.Probe, error) {
	h := w.spec.Health
	nw, err := w.s.net.Namespace(w.spec.Network)
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
		return health.TCPExchange(nw, "127.0.0.1:"+p, h.Send, h.Expect), nil
	case h.HTTP != nil:
		p, err := port(h.HTTP.Endpoint)
		if err != nil {
			return nil, err
		}
		return health.HTTP(nw, "http://127.0.0.1:"+p+h.HTTP.Path, h.HTTP.Expect), nil
	}
	return w.execIn(nw, h.Exec)
}

// execIn is argv run for the workload as its exec check is: inside its
// network and cgroup, as its user, with its environment.
func (w *workload) execIn(nw *sandbox.Network, argv []string) (health.Probe, error) {
	used, err := w.s.usedEndpoints(w.spec, false)
	if err != nil {
		return nil, err
	}
	resolved, err := w.s.withReferences(w.spec, false)
	if err != nil {
		return nil, err
	}
	pl, err := makePlan(resolved, w.s.caps(w.spec.Kind), w.ports, used)
	if err != nil {
		return nil, err
	}
	var cg *sandbox.Cgroup
	if w.s.cfg.Cgroups != nil {
		cg, _ = w.s.cfg.Cgroups.Open(w.name)
	}
	cred, err := probeCredential(w.spec, w.s.caps(w.spec.Kind))
	if err != nil {
		return nil, err
	}
	env := pl.env
	if len(pl.files) > 0 {
		// Values delivered by file reach the command as they reach the
		// run: through the run's own carrier files, never dropped.
		dir := ""
		if w.proc != nil {
			dir = w.proc.State().CarrierDir
		}
		if dir == "" {
			keys := make([]string, len(pl.files))
			for i, f := range pl.files {
				keys[i] = f.Key
			}
			return nil, fmt.Errorf("%w: %s of workload %s go by file, and its run has no files a command could be given", errdefs.ErrConflict, strings.Join(keys, ", "), w.name)
		}
		env = append(env[:len(env):len(env)], carriers.Pointers(dir, pl.files)...)
	}
	return health.Exec(nw, cg, cred, argv, env), nil
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
		var nw *sandbox.Network
		if nw, err = w.s.net.Namespace(w.spec.Network); err == nil {
			var p health.Probe
			if p, err = w.execIn(nw, r.Exec); err == nil {
				ctx, cancel := context.WithTimeout(w.s.ctx, reloadTimeout)
				err = p.Check(ctx)
				cancel()
			}
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

// probeCredential is who an exec check runs as: the workload's user, so
// that a check never has more than the workload it checks. A containerd
// workload's user lives in its image, not on the host: its checks run as
// nobody.
func probeCredential(sp *spec.Workload, caps driver.Capabilities) (*syscall.Credential, error) {
	switch {
	case sp.User == "":
		return nil, nil
	case caps.ImageUser:
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

// refusedEvery is how often refused notify messages are said, at most.
const refusedEvery = 10 * time.Second

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
	// Who speaks must be of the workload: in its cgroup, or without
	// cgroups in its run's session. A sender that is gone by the time its
	// message is read (a short-lived helper) is not heard.
	belongs := func(pid int32) bool {
		if w.s.cfg.Cgroups != nil {
			if cg, err := w.s.cfg.Cgroups.Open(w.name); err == nil {
				return cg.Contains(int(pid))
			}
		}
		return sessionOf(int(pid)) == int(w.runPID.Load())
	}
	// Refusals are counted (at most health.NotifyRate a second are read),
	// and said at most every refusedEvery: a flood of them costs a line,
	// not a line each. The socket's one reader calls
	// this, so its state needs no lock.
	var refused, said int
	var saidAt time.Time
	n, err := health.ListenNotify(path, uid, belongs, func(m health.Message) {
		go func() { _ = w.call(w.s.ctx, func() error { w.notified(m); return nil }) }()
	}, func(pid int32) {
		refused++
		total := refused
		w.update(func(v *status.Workload) { v.NotifyRefused = total })
		if time.Since(saidAt) < refusedEvery {
			return
		}
		w.log.Warn("notify messages from processes that are not the workload's, ignored",
			zap.Int32("pid", pid), zap.Int("since_last_said", refused-said), zap.Int("total", refused))
		said, saidAt = refused, time.Now()
	})
	if err != nil {
		return err
	}
	w.notify = n
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
		w.healthChanged(w.healthGen, false, errors.New("the program says it is stopping"))
	case m.Ready && !w.ready:
		w.ready = true
		w.saveRun()
		w.healthChanged(w.healthGen, true, nil)
	}
}

// sessionOf is a process's session id, 0 when it cannot be read.
func sessionOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}
