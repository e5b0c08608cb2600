package daemon

import (
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// The host's limits that bound how many workloads one daemon keeps, and
// what a workload takes of each: descriptors for its pidfd and its log
// pipe's read end while it runs, and for its log file and index once it
// has written (a few more for the moment it starts), a process at least;
// a workload that writes its log file itself (a containerd shim's) also
// takes an inotify watch while its log is quiet (without one, the log is
// only looked at less often). The log holder keeps one descriptor a
// workload, under its own limit.
const (
	filesPerWorkload = 4
	filesReserved    = 256 // the socket, clients, logs being read, the state
)

type capacity struct {
	files          uint64 // RLIMIT_NOFILE, as Go raised it to the hard limit
	pidMax         int    // kernel.pid_max
	threadsMax     int    // kernel.threads-max
	inotifyWatches int    // fs.inotify.max_user_watches
}

// readCapacity reads the limits; one it cannot read is 0.
func readCapacity() capacity {
	var c capacity
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		c.files = rl.Cur
	}
	c.pidMax = readInt("/proc/sys/kernel/pid_max")
	c.threadsMax = readInt("/proc/sys/kernel/threads-max")
	c.inotifyWatches = readInt("/proc/sys/fs/inotify/max_user_watches")
	return c
}

// workloads is how many workloads the limits allow, and the limit that
// binds first.
func (c capacity) workloads() (int, string) {
	n, by := int(^uint(0)>>1), ""
	if c.files > 0 {
		if f := (int(min(c.files, 1<<30)) - filesReserved) / filesPerWorkload; f < n {
			n, by = max(f, 0), "open files (LimitNOFILE, ulimit -n)"
		}
	}
	for _, l := range []struct {
		v    int
		name string
	}{{c.pidMax, "kernel.pid_max"}, {c.threadsMax, "kernel.threads-max"}} {
		if l.v > 0 && l.v < n {
			n, by = l.v, l.name
		}
	}
	return n, by
}

// reportCapacity logs the limits and what they allow, and warns when they
// allow fewer than 10,000 workloads, which the daemon is built to keep.
func reportCapacity(log *zap.Logger) {
	c := readCapacity()
	n, by := c.workloads()
	fields := []zap.Field{zap.Int("workloads", n), zap.String("bound_by", by), zap.Uint64("open_files", c.files),
		zap.Int("pid_max", c.pidMax), zap.Int("threads_max", c.threadsMax), zap.Int("inotify_watches", c.inotifyWatches)}
	if n < 10000 {
		log.Warn("this host's limits allow fewer than 10,000 workloads; raise the one named", fields...)
		return
	}
	log.Info("capacity", fields...)
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
