package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoInheritedDescriptors: a workload gets /dev/null and its log, never
// one of the daemon's descriptors: its socket, its locks, other workloads'
// logs and pidfds, nor what the daemon itself inherited from whoever
// started it (a pipe of a CI runner held by a workload keeps the job from
// ever ending).
func TestNoInheritedDescriptors(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := startDaemon(t, withFiles(w))
	w.Close()
	for _, name := range []string{"first", "second"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, name+".yaml", "name: "+name+"\ncommand: [\"@PROG@\", print, \"1\"]\n"))
		d.waitLog(t, name, "stderr line 1")
	}
	startStream(t, d.socket, "logs", "-f", "first") // an open connection in the daemon
	d.waitStreams(t, 1)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "third.yaml", "name: third\ncommand: [\"@PROG@\", print, \"1\"]\n"))
	d.waitLog(t, "third", "stderr line 1")

	for _, name := range []string{"first", "second", "third"} {
		for fd, target := range descriptors(t, d.get(t, name).PID) {
			if bad := foreign(d, name, target); bad != "" {
				t.Errorf("%s holds fd %d -> %s: %s", name, fd, target, bad)
			}
		}
	}
}

// foreign says why a workload's descriptor is not its own, or "".
func foreign(d *daemon, name, target string) string {
	switch {
	case target == os.DevNull, strings.HasPrefix(target, "/sys/fs/cgroup/"):
		return "" // stdin, and what the Go runtime of testprog reads
	case target == "anon_inode:[eventpoll]", target == "anon_inode:[eventfd]":
		return "" // testprog's own poller
	case strings.HasPrefix(target, "socket:"), strings.HasPrefix(target, "pipe:"):
		return "a socket or pipe it did not open (testprog opens none in print mode)"
	case target == "anon_inode:[pidfd]":
		return "a pidfd of the daemon's"
	case target == filepath.Join(d.stateDir, "logs", name+".log"):
		return ""
	}
	return "not one of its own"
}

// descriptors maps a process's descriptors from 3 up to their targets.
func descriptors(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fds := map[int]string{}
	for _, e := range entries {
		var fd int
		fmt.Sscan(e.Name(), &fd)
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && fd > 2 {
			fds[fd] = target
		}
	}
	return fds
}
