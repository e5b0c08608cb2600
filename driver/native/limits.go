package native

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// LoginFiles is the open files limit (RLIMIT_NOFILE) a workload starts
// with: what a login on a Debian host has (systemd's DefaultLimitNOFILE,
// 1024:524288), the soft limit select(2) can serve and a hard limit a
// program that needs more raises its own to. A daemon's hard limit below
// 524288 is the workloads' too.
var LoginFiles = unix.Rlimit{Cur: 1024, Max: 524288}

// The daemon holds a descriptor or more a workload, so its own soft limit
// is its hard one (Go raises it so at start). A child of a Go program
// inherits the limits of its parent, but for one: when Go raised the soft
// limit at start, it puts back the limits it found in every program it
// execs (os/exec, syscall.StartProcess), between fork and exec, where no
// other code of the daemon's runs. So a daemon started with login's
// limits hands its workloads (their health checks, flyd exec) login's
// limits, and one started with soft == hard (a unit's LimitNOFILE=N, as
// Go then raises nothing) would hand them N: that one starts itself again
// with login's limits (StartWithLoginFiles), and runs with the hard limit
// it had, at most 524288, less one.

// restartedEnv marks the daemon started again: it does not start itself a
// third time, whatever it finds.
const restartedEnv = "FLYD_DAEMON_LOGIN_FILES"

// StartWithLoginFiles execs the daemon's program again, with args and
// its environment, under LoginFiles' limits, if Go would not hand those
// to its children as it is: when it returns, nil, they do. It is called
// first thing, before the daemon holds anything.
func StartWithLoginFiles(args []string) error {
	if os.Getenv(restartedEnv) != "" {
		return os.Unsetenv(restartedEnv)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if rl.Cur < rl.Max {
		return nil // Go raised it, and puts back what it found
	}
	want := unix.Rlimit{Cur: min(LoginFiles.Cur, rl.Max), Max: min(LoginFiles.Max, rl.Max)}
	if want.Cur+1 >= want.Max {
		return nil // too low a hard limit for Go to raise a soft one below it
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE %d:%d: %w", want.Cur, want.Max, err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, restartedEnv+"=") })
	// The program this process runs, even if its file was replaced.
	err := syscall.Exec("/proc/self/exe", args, append(env, restartedEnv+"=1"))
	_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	return fmt.Errorf("start again with RLIMIT_NOFILE %d:%d: %w", want.Cur, want.Max, err)
}
