package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Usage is what a cgroup's processes use: CPU time since they began, the
// memory they hold, and how many there are.
type Usage struct {
	CPU    time.Duration
	Memory int64
	Procs  int
}

// userHZ is the unit of /proc/PID/stat's CPU times, fixed at 100 on Linux
// whatever the kernel's own tick.
const userHZ = 100

// Usage reads the cgroup's usage. On v2 it is the cgroup's own account
// (cpu.stat, memory.current: what exited processes used counts too, and
// page cache); on v1, where a workload without limits is only in the
// freezer hierarchy, it is the sum over the processes in it now (their
// CPU times and resident memory). An error wraps errdefs.ErrNotFound if
// the cgroup does not exist.
func (g *Cgroup) Usage() (Usage, error) {
	pids, err := g.Procs()
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Procs: len(pids)}
	if g.cg.l.version == 2 {
		usec, okCPU, _ := readKeyed(filepath.Join(g.Path, "cpu.stat"), "usage_usec")
		mem, errMem := readInts(filepath.Join(g.Path, "memory.current"))
		if okCPU && errMem == nil && len(mem) == 1 {
			u.CPU, u.Memory = time.Duration(usec)*time.Microsecond, int64(mem[0])
			return u, nil
		}
	}
	page := int64(os.Getpagesize())
	for _, p := range pids {
		cpu, rss, ok := procUsage(p)
		if ok {
			u.CPU += cpu
			u.Memory += rss * page
		}
	}
	return u, nil
}

// procUsage is a process's CPU time (user and system) and resident pages;
// ok is false once it has gone.
func procUsage(pid int) (time.Duration, int64, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing one; utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	statm, err3 := os.ReadFile(dir + "/statm")
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	m := bytes.Fields(statm)
	if len(m) < 2 {
		return 0, 0, false
	}
	rss, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, rss, true
}
