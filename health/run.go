package health

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// RunNotify is the notify socket of one run of a workload, with its
// watchdog: what a program that tells its health itself is heard on.
type RunNotify struct {
	Path     string        // where the socket is bound
	UID      int           // who owns it: the workload's user
	Watchdog time.Duration // the watchdog's period; 0: none
	// Belongs says whether a sender is a process of the run (RunMember).
	Belongs func(pid int32) bool
	// On hears the run's messages that say something for its supervisor
	// (NotifyHandlers.On).
	On func(Message)
	// Refused hears of each refused sender: how many the socket refused
	// in all, and whether this one is worth a line (at most one every
	// RefusedEvery), with how many went unsaid since the last one said.
	Refused func(pid int32, total, unsaid int, say bool)
	// WatchdogChanged hears that the watchdog's verdict changed.
	WatchdogChanged func()
}

// RefusedEvery is how often a notify socket's refused senders are worth
// a line, at most: a flood of them costs a line, not a line each.
const RefusedEvery = 10 * time.Second

// Listen binds the socket and starts its watchdog (nil without a period).
func (r RunNotify) Listen() (*Notify, *Watchdog, error) {
	// The socket's one reader counts the refusals: no lock.
	var refused, said int
	var saidAt time.Time
	h := NotifyHandlers{
		Belongs: r.Belongs,
		On:      r.On,
		Refused: func(pid int32) {
			refused++
			say := time.Since(saidAt) >= RefusedEvery
			r.Refused(pid, refused, refused-said, say)
			if say {
				said, saidAt = refused, time.Now()
			}
		},
	}
	// The watchdog hears every message on the socket's reader, keepalives
	// repeated included, and tells only when its verdict changes.
	var d *Watchdog
	if r.Watchdog > 0 {
		d = NewWatchdog(r.Watchdog, r.WatchdogChanged)
		h.Every = d.Hear
	}
	n, err := ListenNotify(r.Path, r.UID, h)
	if err != nil {
		if d != nil {
			d.Stop()
		}
		return nil, nil, err
	}
	return n, d, nil
}

// RunMember says whether a process is of a run: in the workload's cgroup
// (name, of cgroups), or without cgroups (nil) in the session of its main
// process, runPID. A process gone by the time it is asked is not.
func RunMember(cgroups *sandbox.Cgroups, name string, runPID func() int) func(pid int32) bool {
	return func(pid int32) bool {
		if cgroups != nil {
			if cg, err := cgroups.Open(name); err == nil {
				return cg.Contains(int(pid))
			}
		}
		return SessionOf(int(pid)) == runPID()
	}
}

// SessionOf is a process's session id, 0 when it cannot be read.
func SessionOf(pid int) int {
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

// NotifyEnv is what a notify program is told, put in env: where its
// socket is, and its watchdog's period (0: none), as systemd tells them.
func NotifyEnv(env map[string]string, path string, watchdog time.Duration) {
	env["NOTIFY_SOCKET"] = path
	if watchdog > 0 {
		env["WATCHDOG_USEC"] = strconv.FormatInt(watchdog.Microseconds(), 10)
	}
}

// WithWatchdogPID has a watchdog program (its spec's check, h, with a
// watchdog period; nil: none) find its own pid in WATCHDOG_PID, as systemd sets it, so that sd_watchdog_enabled()
// knows the watchdog is its and not a child's: only the started process
// knows its pid, so a shell sets it and execs the program in its place
// (the pid stays). A program not found on env's PATH is left to fail to
// start as any other.
func WithWatchdogPID(args, env []string, h *spec.Health) []string {
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
