package health

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
)

// Awake guards a probe with a look at the workload's main process: while
// it is stopped (SIGSTOP, SIGTSTP, a tracer) the check fails without
// running, since a stopped program still has its listening sockets, whose
// backlog the kernel goes on accepting into, and a tcp check would pass.
// pid is asked at every check (0: no process to look at, the probe alone
// decides). A nil p is a check of the process alone, for a program that
// says itself when it is ready.
func Awake(pid func() int, p Probe) Probe { return awakeProbe{pid: pid, probe: p} }

type awakeProbe struct {
	pid   func() int
	probe Probe
}

func (a awakeProbe) Check(ctx context.Context) error {
	if pid := a.pid(); pid > 0 {
		if stopped, _ := Stopped(pid); stopped {
			return fmt.Errorf("the main process (pid %d) is stopped: it runs nothing until it gets SIGCONT", pid)
		}
	}
	if a.probe == nil {
		return nil
	}
	return a.probe.Check(ctx)
}

// Stopped tells whether process pid is stopped by a signal or a tracer
// (state T or t in /proc/PID/stat).
func Stopped(pid int) (bool, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	// pid (comm) state ...: comm may hold anything, the last ')' ends it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, stat)
	}
	switch stat[i+2] {
	case 'T', 't':
		return true, nil
	}
	return false, nil
}
