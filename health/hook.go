package health

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// Hook is the health of one workload's runs, kept on its owner's loop:
// the checks of the current run, made ready before it starts (Prepare),
// started with it (Start) and stopped with it (Stop), and what the run
// said of its readiness, which its owner records for a later daemon
// (Ready, LogFrom) and gives back when it adopts the run (Adopted).
//
// Every method is called on the owner's loop, and so is every function
// of its HookConfig but Post and Refused: what the checks hear on their
// own goroutines comes back to the loop through Post.
type Hook struct {
	cfg HookConfig
	// hs is the health section the checks of the current run were started
	// for; nil while none are.
	hs *spec.Health
	// gen tells the verdicts of the current checks from those of checks
	// stopped since.
	gen     int
	monitor *Monitor
	notify  *Notify
	told    Told
	ready   bool
	// shown is the verdict last given to the owner since the checks
	// started; nil: none.
	shown *bool
	// pid is the current run's main process, for the checks of other
	// goroutines: stored by the workload's loop (SetPID), loaded by the
	// probes; it guards nothing else.
	pid atomic.Int64
	// run is the current run, as its hooks keep it (runhook.go); nil
	// while none is.
	run *runhook.Run
	// user is the current run's spec's, who owns its notify socket; ""
	// for root.
	user string
}

// HookConfig is what a Hook's checks are made with, and whom they tell.
type HookConfig struct {
	// Workload names the workload: its cgroup, of Cgroups (nil: a run's
	// processes are its main process's session), tells the processes of
	// the run on its notify socket.
	Workload string
	Cgroups  *sandbox.Cgroups
	// NotifyDir is where the notify sockets of runs are bound, each at
	// NotifyPath.
	NotifyDir string
	// Log is the workload's log, for a check of its output.
	Log func() *logfile.Log
	// Probe is the check of a spec whose run does not tell its health.
	Probe func() (Probe, error)
	// Post runs f on the owner's loop, from a goroutine of its own: it
	// never waits for the loop, which may be stopping the very check
	// that posts.
	Post func(f func())
	// Verdict hears that the run's health changed.
	Verdict func(healthy bool, why error)
	// Ready hears that the run said it is ready (READY=1, or its line):
	// the owner records it.
	Ready func()
	// Status hears what the program says of itself (STATUS=).
	Status func(msg string)
	// Refused hears of the senders the notify socket refused
	// (RunNotify.Refused).
	Refused func(pid int32, total, unsaid int, say bool)
	// Warn hears of a check that cannot be made.
	Warn func(msg string, err error)
}

// NewHook keeps the health of a workload's runs with cfg.
func NewHook(cfg HookConfig) *Hook { return &Hook{cfg: cfg} }

// NotifyPath is where the notify socket of workload's runs is bound, in
// dir (HookConfig.NotifyDir).
func NotifyPath(dir, workload string) string { return filepath.Join(dir, workload+".sock") }

// socketOwner is the uid of user, who owns a run's notify socket: its
// workload's user, root for none. A user the host does not know is an
// error that retrying cannot fix (driver.ErrExec), as the run's own start
// would be.
func socketOwner(user string) (int, error) {
	if user == "" {
		return 0, nil
	}
	a, err := execenv.Lookup(user)
	if err != nil {
		return 0, fmt.Errorf("%w: user %q: %v", driver.ErrExec, user, err)
	}
	return int(a.UID), nil
}

// SetPID is the current run's main process.
func (h *Hook) SetPID(pid int) { h.pid.Store(int64(pid)) }

// Ready says whether the current run said it is ready.
func (h *Hook) Ready() bool { return h.ready }

// LogFrom is where the current run's output begins in its log; nil: not
// known.
func (h *Hook) LogFrom() *int64 { return h.told.LogFrom }

// Adopted takes what an earlier daemon kept of a run it adopts: whether
// the run said it is ready, which it does not say twice, and where its
// output began.
func (h *Hook) Adopted(ready bool, logFrom *int64) { h.ready, h.told.LogFrom = ready, logFrom }

// Prepare readies what a run's checks need before it starts, and puts in
// env what the program must be told: its notify socket, bound before it
// starts (it may say READY=1 at once), and its watchdog's period; where
// its output begins in its log, so that no earlier run's line counts.
func (h *Hook) Prepare(hs *spec.Health, env map[string]string) error {
	switch {
	case hs == nil:
	case hs.Notify:
		if err := h.listen(hs); err != nil {
			return err
		}
		NotifyEnv(env, NotifyPath(h.cfg.NotifyDir, h.cfg.Workload), hs.Watchdog.Duration)
	case hs.Log != "":
		h.told.LogFrom = nil
		if end, err := LogEnd(h.cfg.Log()); err == nil {
			h.told.LogFrom = &end
		} else {
			h.cfg.Warn("where the run's output begins in its log is not known: its log check reads what comes next", err)
		}
	}
	return nil
}

// Start starts checking the current run, which started at started, when
// hs has a check.
func (h *Hook) Start(hs *spec.Health, started time.Time) {
	if hs == nil {
		return
	}
	var probe Probe // nil when the program tells readiness
	verdict := h.changed
	if hs.Notify || hs.Log != "" {
		// An adopted run said READY=1 (or printed its line) to an earlier
		// daemon: it does not say it twice. Later messages come to a
		// socket bound anew.
		if hs.Notify {
			if err := h.listen(hs); err != nil {
				h.cfg.Warn("no notify socket", err)
			}
			if h.told.Watchdog != nil && h.ready {
				h.told.Watchdog.Arm()
			}
		}
		verdict = h.awakeChanged
	} else {
		var err error
		if probe, err = h.cfg.Probe(); err != nil {
			h.cfg.Warn("no health check", err)
			return
		}
	}
	h.hs = hs
	h.gen++
	gen := h.gen
	if hs.Log != "" && !h.ready {
		h.startLogCheck(hs, gen, started)
	}
	h.judge()
	// Every check also fails while the main process is stopped.
	probe = Awake(func() int { return int(h.pid.Load()) }, probe)
	h.monitor = Start(probe, ConfigOf(hs), func(ok bool, err error) {
		h.cfg.Post(func() { verdict(gen, ok, err) })
	})
}

// Stop stops the checks of the current run and forgets what it said.
func (h *Hook) Stop() {
	h.gen++
	if h.monitor != nil {
		h.monitor.Stop()
		h.monitor = nil
	}
	if h.notify != nil {
		h.notify.Close()
		h.notify = nil
	}
	h.told.Stop()
	h.ready, h.hs, h.shown = false, nil, nil
}

// changed gives the owner a verdict of the current checks. It is the last
// thing its callers do: the owner may stop the checks, and start the
// next run's, as it hears it.
func (h *Hook) changed(gen int, ok bool, why error) {
	if gen != h.gen || h.hs == nil {
		return
	}
	h.shown = &ok
	h.cfg.Verdict(ok, why)
}

// judge gives the verdict of a run that tells its health itself (Told),
// when it changed.
func (h *Hook) judge() {
	if h.hs == nil || !(h.hs.Notify || h.hs.Log != "") {
		return
	}
	ok, why, known := h.told.Verdict(h.ready)
	if !known {
		return // not ready yet, and not late
	}
	if h.shown != nil && *h.shown == ok {
		return
	}
	h.changed(h.gen, ok, why)
}

// awakeChanged is the verdict of the look at the main process of a run
// that tells its health itself: stopped, it is unhealthy.
func (h *Hook) awakeChanged(gen int, ok bool, err error) {
	if gen != h.gen {
		return
	}
	h.told.Asleep = nil
	if !ok {
		h.told.Asleep = err
	}
	h.judge()
}

// startLogCheck follows the run's output in its log for the spec's line:
// from where it began, or for an adopted run whose beginning is not
// known, from where the log ends now (FollowLog).
func (h *Hook) startLogCheck(hs *spec.Health, gen int, started time.Time) {
	re, err := regexp.Compile(hs.Log)
	if err != nil {
		h.cfg.Warn("no log check", err) // validated at apply
		return
	}
	from := int64(-1) // not known: where the log ends when first read
	if h.told.LogFrom != nil {
		from = *h.told.LogFrom
	}
	within := max(hs.Timeout.Duration, hs.StartPeriod.Duration)
	h.told.LogCheck = StartLogCheck(FollowLog(h.cfg.Log(), from), re, started, within, func(ok bool, err error) {
		h.cfg.Post(func() { h.logChecked(gen, ok, err) })
	})
}

// logChecked takes the log check's verdict: its line came, which is the
// run's readiness (kept for a later daemon, as READY=1 is), or it did not
// in time.
func (h *Hook) logChecked(gen int, ok bool, err error) {
	if gen != h.gen || h.hs == nil {
		return
	}
	if ok {
		h.said()
	} else {
		h.told.Late = err
	}
	h.judge()
}

// listen binds the run's notify socket, unless it is bound: owned by the
// workload's user, heard only from the workload's processes.
func (h *Hook) listen(hs *spec.Health) error {
	if h.notify != nil {
		return nil
	}
	if err := os.MkdirAll(h.cfg.NotifyDir, 0o711); err != nil {
		return err
	}
	uid, err := socketOwner(h.user)
	if err != nil {
		return err
	}
	var n *Notify // read on the loop only, once set
	var d *Watchdog
	r := RunNotify{
		Path: NotifyPath(h.cfg.NotifyDir, h.cfg.Workload), UID: uid, Watchdog: hs.Watchdog.Duration,
		Belongs: RunMember(h.cfg.Cgroups, h.cfg.Workload, func() int { return int(h.pid.Load()) }),
		On: func(m Message) {
			h.cfg.Post(func() {
				if h.notify == n {
					h.notified(m)
				}
			})
		},
		Refused: h.cfg.Refused,
		WatchdogChanged: func() {
			h.cfg.Post(func() {
				if h.told.Watchdog == d {
					h.judge()
				}
			})
		},
	}
	if n, d, err = r.Listen(); err != nil {
		return err
	}
	h.notify, h.told.Watchdog = n, d
	return nil
}

// notified takes a message of the program's: READY=1 makes it healthy
// (once), STOPPING=1 unhealthy, STATUS= is told as it is.
func (h *Hook) notified(m Message) {
	if h.hs == nil {
		return
	}
	if m.Status != "" {
		h.cfg.Status(m.Status)
	}
	switch {
	case m.Stopping:
		h.told.Stopping = true
	case m.Ready && !h.ready:
		h.said()
	}
	h.judge()
}
