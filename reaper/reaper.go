// Package reaper makes the daemon the reaper of its workloads' orphans
// without ever stealing the exit status of a child it started on purpose.
//
// Every part of the daemon that forks (the native runtime, exec health
// checks) forks through Spawn, which records the child before the reaper
// can see it, and calls Forget once it has waited for it. The reaper reaps
// only the others: processes that were re-parented to the daemon.
package reaper

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// children are the daemon's own children, waited for by whoever
	// started them.
	children sync.Map // pid → struct{}
	// starting is held shared from fork to the record in children, and
	// exclusively by the reaper while it looks: a child that exits at once
	// is never taken for an orphan.
	starting sync.RWMutex
)

// Spawn runs start, which forks one child and returns its pid, and records
// the child as one its caller will wait for.
func Spawn(start func() (int, error)) error {
	starting.RLock()
	defer starting.RUnlock()
	pid, err := start()
	if err == nil {
		children.Store(pid, struct{}{})
	}
	return err
}

// Claim records pid, a process that became the daemon's child by being
// re-parented to it (the program a daemonizing workload forked), as one
// its caller will wait for: the reaper of orphans leaves its status to
// the caller, who calls Forget once it has it.
func Claim(pid int) {
	starting.RLock()
	defer starting.RUnlock()
	children.Store(pid, struct{}{})
}

// Forget is called once the child's status has been collected.
func Forget(pid int) { children.Delete(pid) }

// reapDelay is how long an orphan may stay a zombie: the reaper looks
// once per burst of SIGCHLDs, since each look reads every thread's
// children list.
const reapDelay = 20 * time.Millisecond

// Become makes this process a child subreaper: orphans among its
// descendants (a daemon's double fork, a shell's child after the shell
// died) are re-parented to it instead of PID 1 — which, on some hosts,
// never reaps them — and it reaps them until ctx is done.
func Become(ctx context.Context) error {
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
			}
			// A burst of exits, as when many workloads stop at once, is
			// one look: wait for the burst, then drain its signals.
			select {
			case <-ctx.Done():
				return
			case <-time.After(reapDelay):
			}
			for len(sigs) > 0 {
				<-sigs
			}
			reapOrphans()
		}
	}()
	return nil
}

// reapOrphans reaps the exited children that nobody started on purpose,
// one by one by pid, so the others' status stays for their own Wait. It
// holds Spawn up while it looks: one file, however many threads fork.
func reapOrphans() {
	starting.Lock()
	defer starting.Unlock()
	// An orphan goes to the first live thread of its new parent: the
	// thread group's leader, which the Go runtime never lets exit. Only
	// if the leader's list cannot be read is every thread's read.
	tasks := []string{"/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"}
	if _, err := os.Stat(tasks[0]); err != nil {
		tasks, _ = filepath.Glob("/proc/self/task/*/children")
	}
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
