package native

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// children are the runs this process started and reaps itself through
// exec.Cmd.Wait; the reaper must never steal their exit status.
var children sync.Map // pid → struct{}

// starting is held (shared) from fork to the record in children, and
// (exclusive) by the reaper while it looks: a run that exits at once is
// never taken for an orphan.
var starting sync.RWMutex

// BecomeSubreaper makes this process the reaper of every orphan among its
// workloads' descendants (a daemon's double fork, a shell's child after
// the shell died), so they stay under flyd's watch instead of going to
// PID 1 — which, on some hosts, never reaps them. It reaps those orphans
// until ctx is done.
func BecomeSubreaper(ctx context.Context) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sigs:
				reapOrphans()
			}
		}
	}()
	return nil
}

// reapOrphans reaps the exited children that are not runs: only those
// are listed by pid and waited for one by one, so a run's status stays for
// its own Wait.
func reapOrphans() {
	starting.Lock()
	defer starting.Unlock()
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if _, ours := children.Load(pid); ours {
				continue
			}
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}
