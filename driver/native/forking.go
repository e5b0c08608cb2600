package native

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// A daemonizing program (spec.Forking) is started as any other, but the
// process flyd starts is only its launcher: it forks the program, which
// writes its pid to a file, and exits. The run's main process is the one
// the file names, and only if it is a live process of the workload's
// cgroup: the file is the program's to write, so what it says is checked,
// never trusted. The cgroup was emptied before the run began, so a
// process in it is this run's.

// followed is the main process a pid file named: its pid, a pidfd open on
// it, and its start time.
type followed struct {
	pid        int
	fd         int
	startTicks uint64
}

// pidFilePoll bounds the wait between two looks at the pid file.
const pidFilePoll = 50 * time.Millisecond

// follow waits until f's pid file names a live process of cg, for at most
// f.Timeout, while the launcher (pid launcher, pidfd lfd, which follow
// takes) runs or has exited 0. The launcher exiting with an error before
// the file names a process, or exiting 0 leaving nothing in the cgroup,
// fails the start, as the timeout does: the cgroup is then killed. A file
// that another user could write fails it at once (driver.ErrExec).
func follow(ctx context.Context, f *spec.Forking, uid int, cg *sandbox.Cgroup, launcher, lfd int) (followed, error) {
	deadline := time.Now().Add(f.Timeout.Duration)
	launcherDone := false
	defer func() {
		if !launcherDone {
			// Still running (pg_ctl waits for its server): the daemon's
			// reaper of orphans reaps it when it ends.
			reaper.Forget(launcher)
		}
		syscall.Close(lfd)
	}()
	fail := func(err error) (followed, error) {
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = cg.Kill(kctx)
		cancel()
		if !launcherDone {
			// Killed with the cgroup: reaped here, not left a zombie.
			if _, ok := reap(lfd); ok {
				launcherDone = true
				reaper.Forget(launcher)
			}
		}
		return followed{}, err
	}
	var last string // why the file names no process yet
	for wait := time.Millisecond; ; wait = min(2*wait, pidFilePoll) {
		m, why, err := readPIDFile(f.PIDFile, uid, cg)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", driver.ErrExec, err))
		}
		if why == "" {
			reaper.Claim(m.pid)
			return m, nil
		}
		last = why
		if !launcherDone {
			if ws, exited := launcherExit(lfd); exited {
				launcherDone = true
				reaper.Forget(launcher)
				if !ws.Exited() || ws.ExitStatus() != 0 {
					return fail(fmt.Errorf("the program exited (%s) before forking.pid_file %s named its main process (%s)", wsString(ws), f.PIDFile, last))
				}
			}
		}
		if launcherDone {
			// Exited 0: fine for a launcher, as long as it left the
			// program behind to write the file.
			if procs, err := cg.Procs(); err == nil && len(procs) == 0 {
				// One more look: the program may have written the file
				// and exited between the two looks (then it ended).
				if m, why, err := readPIDFile(f.PIDFile, uid, cg); err == nil && why == "" {
					reaper.Claim(m.pid)
					return m, nil
				}
				return fail(fmt.Errorf("the program exited 0 and left no process in its cgroup for forking.pid_file %s to name (%s)", f.PIDFile, last))
			}
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("forking.pid_file %s named no process of the workload within forking.timeout (%s): %s", f.PIDFile, f.Timeout.Duration, last))
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("waiting for forking.pid_file %s: %w", f.PIDFile, ctx.Err()))
		case <-time.After(wait):
		}
	}
}

// launcherExit reaps the launcher if it has exited.
func launcherExit(lfd int) (syscall.WaitStatus, bool) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PIDFD, lfd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil || info.Signo == 0 {
		return 0, false
	}
	return reap(lfd)
}

func wsString(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "exit code " + strconv.Itoa(ws.ExitStatus())
}

// readPIDFile reads the pid file and opens the process it names. why says
// why it names no process of the workload yet (absent, empty, a process
// gone or outside cg), to be looked at again; err, that the file may not
// be trusted at all.
func readPIDFile(path string, uid int, cg *sandbox.Cgroup) (m followed, why string, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return m, "it does not exist yet", nil
	case errors.Is(err, unix.ELOOP):
		return m, "", fmt.Errorf("forking.pid_file %s is a symbolic link: flyd follows a pid only from a file of the workload's own", path)
	case err != nil:
		return m, "", fmt.Errorf("forking.pid_file %s: %w", path, err)
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return m, "", fmt.Errorf("forking.pid_file %s: %w", path, err)
	}
	if err := trusted(path, "file", st, uid, false); err != nil {
		return m, "", err
	}
	buf := make([]byte, 64)
	n, _ := file.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if perr != nil || pid <= 0 {
		return m, "it holds no pid", nil
	}
	// The pidfd first: from here the pid names this process only, and
	// what is read of it below is of this process while it lives.
	pfd, err := pidfdOpen(pid)
	if err != nil {
		return m, fmt.Sprintf("it names pid %d, which is not running", pid), nil
	}
	ok := false
	defer func() {
		if !ok {
			syscall.Close(pfd)
		}
	}()
	if !cg.Contains(pid) {
		return m, fmt.Sprintf("it names pid %d, which is not a process of the workload's cgroup: not followed", pid), nil
	}
	ps, err := readStat(pid)
	if err != nil || ps.zombie {
		return m, fmt.Sprintf("it names pid %d, which has exited", pid), nil
	}
	// Still the process the pidfd names: the pid was not reused between
	// the looks above.
	if err := unix.PidfdSendSignal(pfd, 0, nil, 0); err != nil {
		return m, fmt.Sprintf("it names pid %d, which has exited", pid), nil
	}
	ok = true
	return followed{pid: pid, fd: pfd, startTicks: ps.startTicks}, "", nil
}

// checkPIDDir refuses a pid file in a directory another user than root
// and the workload's (uid) could write, or under one: whoever writes the
// file chooses the pid flyd follows. It is checked before each start;
// the file itself is checked each time it is read.
func checkPIDDir(path string, uid int) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("forking.pid_file %s: its directory: %w", path, err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return fmt.Errorf("forking.pid_file %s: %w", path, &fs.PathError{Op: "stat", Path: d, Err: err})
		}
		if err := trusted(path, "directory "+d, st, uid, true); err != nil {
			return err
		}
		if d == "/" {
			return nil
		}
	}
}

// trusted says whether only root and uid can write what st describes: it
// is owned by one of them and neither its group nor others may write it
// (a directory writable by others with its sticky bit, as /tmp, lets no
// one replace what another owns in it).
func trusted(path, what string, st unix.Stat_t, uid int, dir bool) error {
	mode := st.Mode & 0o7777
	switch {
	case !dir && st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("forking.pid_file %s is not a regular file", path)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("forking.pid_file %s: %s is owned by uid %d, neither root nor the workload's user: another user could write the pid flyd follows", path, what, st.Uid)
	case mode&0o022 != 0 && !(dir && mode&unix.S_ISVTX != 0):
		return fmt.Errorf("forking.pid_file %s: %s is writable by its group or others (mode %04o): another user could write the pid flyd follows", path, what, mode)
	}
	return nil
}
