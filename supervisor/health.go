package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	"github.com/flyd-dev/flyd/logfile"
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
			if w.self.watchdog != nil && w.ready {
				w.self.watchdog.Arm()
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
	cfg := health.Config{Interval: h.Interval.Duration, Timeout: h.Timeout.Duration, Failures: h.Failures, StartPeriod: h.StartPeriod.Duration}
	w.monitor = health.Start(probe, cfg, func(ok bool, err error) {
		// Never wait on the loop from here: the loop may be stopping this
		// very monitor.
		go func() {
			_ = w.call(w.s.ctx, func() error { verdict(gen, ok, err); return nil })
		}()
	})
}

// selfHealth is what the health of a run that tells it itself (notify, a
// log line) is judged from, beside w.ready: its READY=1 or its line.
type selfHealth struct {
	asleep   error // the main process is stopped, as the monitor saw
	stopping bool  // it said STOPPING=1
	late     error // its line did not come in time
	watchdog *health.Watchdog
	logCheck *health.LogCheck
	// logFrom is where the run's output begins in its log, taken before
	// it started; nil: not known (a run of a daemon from before it was
	// kept), its output is read from where the log ends.
	logFrom *int64
}

// judge gives the verdict of a run that tells its health itself, when it
// changed: unhealthy while its main process is stopped, once it said it
// is stopping, or while its watchdog is missed; else healthy once it said
// READY=1 or printed its line, and unhealthy if that line is late.
func (w *workload) judge() {
	h := w.spec.Health
	if h == nil || !(h.Notify || h.Log != "") || w.proc == nil {
		return
	}
	ok, why := false, error(nil)
	watchdogOK, watchdogWhy, armed := true, error(nil), false
	if d := w.self.watchdog; d != nil {
		watchdogOK, watchdogWhy, armed = d.Verdict()
	}
	switch {
	case w.self.asleep != nil:
		why = w.self.asleep
	case w.self.stopping:
		why = errors.New("the program says it is stopping")
	case armed && !watchdogOK:
		why = watchdogWhy
	case w.ready:
		ok = true
	case w.self.late != nil:
		why = w.self.late
	default:
		return // not ready yet, and not late
	}
	var was *bool
	w.mu.Lock()
	was = w.view.Healthy
	w.mu.Unlock()
	if was != nil && *was == ok {
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
	w.self.asleep = nil
	if !ok {
		w.self.asleep = err
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
	if w.self.watchdog != nil {
		w.self.watchdog.Stop()
	}
	if w.self.logCheck != nil {
		w.self.logCheck.Stop()
	}
	w.self = selfHealth{}
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
		env["NOTIFY_SOCKET"] = w.s.notifyPath(w.name)
		if h.Watchdog.Duration > 0 {
			env["WATCHDOG_USEC"] = strconv.FormatInt(h.Watchdog.Microseconds(), 10)
		}
	case h.Log != "":
		w.self.logFrom = nil
		if end, err := logEnd(w.s.logs.Of(w.name)); err == nil {
			w.self.logFrom = &end
		} else {
			w.log.Warn("where the run's output begins in its log is not known: its log check reads what comes next", zap.Error(err))
		}
	}
	return nil
}

// withWatchdogPID has a watchdog program find its own pid in
// WATCHDOG_PID, as systemd sets it, so that sd_watchdog_enabled() knows
// the watchdog is its and not a child's: only the started process knows
// its pid, so a shell sets it and execs the program in its place (the pid
// stays). A program flyd cannot find on its PATH is left to fail to
// start as any other.
func (w *workload) withWatchdogPID(args, env []string) []string {
	h := w.spec.Health
	if h == nil || h.Watchdog.Duration <= 0 || len(args) == 0 {
		return args
	}
	if _, err := execenv.LookPath(args[0], env); err != nil {
		return args
	}
	if _, err := os.Stat(shell); err != nil {
		return args
	}
	return append([]string{shell, "-c", `WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$0" "$@"`}, args...)
}

// shell is what sets WATCHDOG_PID.
const shell = "/bin/sh"

// logEnd is the position of the end of a log: where what comes next
// begins.
func logEnd(l *logfile.Log) (int64, error) {
	end := int64(-1)
	err := l.Read(context.Background(), logfile.Query{Tail: 0, Follow: true}, logfile.SinkFunc(func(r logfile.Record) error {
		end = r.Pos // the mark of the end of what the log held
		return errAtEnd
	}))
	if end >= 0 {
		return end, nil
	}
	return 0, err
}

var errAtEnd = errors.New("at the end")

// startLogCheck follows the run's output in its log for the spec's line:
// from where it began, or for an adopted run whose beginning is not
// known, from where the log ends now. Read from the log file, not in the
// pipe's reader: nothing is added to the path of every workload's output,
// and a run that writes its log itself (a containerd shim) is read alike.
func (w *workload) startLogCheck(gen int) {
	h := w.spec.Health
	re, err := regexp.Compile(h.Log)
	if err != nil {
		w.log.Warn("no log check", zap.Error(err)) // validated at apply
		return
	}
	l := w.s.logs.Of(w.name)
	pos := int64(-1) // not known: where the log ends when first read
	if w.self.logFrom != nil {
		pos = *w.self.logFrom
	}
	follow := func(ctx context.Context, out func([]byte) error) error {
		if pos < 0 {
			end, err := logEnd(l)
			if err != nil {
				return err
			}
			pos = end
		}
		return l.Read(ctx, logfile.Query{From: &pos, Follow: true}, logfile.SinkFunc(func(r logfile.Record) error {
			if len(r.Data) == 0 {
				return nil
			}
			if err := out(r.Data); err != nil {
				return err
			}
			pos = r.Pos + int64(len(r.Data))
			return nil
		}))
	}
	started := time.Now()
	if st := w.proc.State(); !st.StartedAt.IsZero() {
		started = st.StartedAt
	}
	within := max(h.Timeout.Duration, h.StartPeriod.Duration)
	w.self.logCheck = health.StartLogCheck(follow, re, started, within, func(ok bool, err error) {
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
		w.self.late = err
	}
	w.judge()
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
	h := health.NotifyHandlers{
		Belongs: belongs,
		Refused: func(pid int32) {
			refused++
			total := refused
			w.update(func(v *status.Workload) { v.NotifyRefused = total })
			if time.Since(saidAt) < refusedEvery {
				return
			}
			w.log.Warn("notify messages from processes that are not the workload's, ignored",
				zap.Int32("pid", pid), zap.Int("since_last_said", refused-said), zap.Int("total", refused))
			said, saidAt = refused, time.Now()
		},
	}
	var n *health.Notify // read on the loop only, once set
	h.On = func(m health.Message) {
		go func() {
			_ = w.call(w.s.ctx, func() error {
				if w.notify == n {
					w.notified(m)
				}
				return nil
			})
		}()
	}
	// The watchdog hears every message on the socket's reader, keepalives
	// repeated included, and tells the loop only when its verdict changes.
	var d *health.Watchdog
	if p := w.spec.Health.Watchdog.Duration; p > 0 {
		d = health.NewWatchdog(p, func() {
			go func() {
				_ = w.call(w.s.ctx, func() error {
					if w.self.watchdog == d {
						w.judge()
					}
					return nil
				})
			}()
		})
		h.Every = d.Hear
	}
	n, err := health.ListenNotify(path, uid, h)
	if err != nil {
		if d != nil {
			d.Stop()
		}
		return err
	}
	w.notify, w.self.watchdog = n, d
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
		w.self.stopping = true
	case m.Ready && !w.ready:
		w.ready = true
		w.saveRun()
	}
	w.judge()
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
