package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/flyd-dev/flyd/errdefs"
)

// cfsPeriod is the CPU quota's accounting period, in microseconds: the
// kernel's default, long enough that the quota is not all overhead and
// short enough that a throttled workload still answers within 100ms.
const cfsPeriod = 100_000

// minCPU is the smallest quota the kernel accepts (1ms) per period.
const minCPU = 0.01

// setting is one value for one control file.
type setting struct {
	ctrl, file, value string
	// limit is false when value only resets the file to "no limit", which a
	// cgroup without the controller has anyway.
	limit bool
}

// validate reports, wrapping errdefs.ErrInvalid, a limit no kernel takes.
func (l Limits) validate() error {
	switch {
	case l.MemoryMax < 0:
		return fmt.Errorf("memory limit %d is negative: %w", l.MemoryMax, errdefs.ErrInvalid)
	case math.IsNaN(l.CPUMax) || l.CPUMax < 0 || l.CPUMax > 1e6 || (l.CPUMax > 0 && l.CPUMax < minCPU):
		return fmt.Errorf("cpu limit %v must be at least %v cores: %w", l.CPUMax, minCPU, errdefs.ErrInvalid)
	case l.CPUWeight < 0 || l.CPUWeight > 10000:
		return fmt.Errorf("cpu weight %d must be between 1 and 10000: %w", l.CPUWeight, errdefs.ErrInvalid)
	case l.PidsMax < 0:
		return fmt.Errorf("pids limit %d is negative: %w", l.PidsMax, errdefs.ErrInvalid)
	}
	return nil
}

// CPUShares is CPUWeight on cgroup v1's scale: v2's weight (default 100)
// onto v1's shares (default 1024), never under v1's floor of 2. Runtimes
// that speak v1's units (OCI's cpu.shares) use it too.
func (l Limits) CPUShares() uint64 { return uint64(max(2, l.CPUWeight*1024/100)) }

// CFSPeriod is the period CPUMax is a quota of, in microseconds.
const CFSPeriod = cfsPeriod

// settings are the file writes that give a cgroup exactly these limits on
// the given cgroup version, in the order they must be written.
func (l Limits) settings(version int) ([]setting, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	quota := int64(math.Round(l.CPUMax * cfsPeriod))
	if version == 1 {
		mem, pids, cpuQuota, shares := "-1", "max", "-1", "1024"
		if l.MemoryMax > 0 {
			mem = strconv.FormatInt(l.MemoryMax, 10)
		}
		if l.PidsMax > 0 {
			pids = strconv.Itoa(l.PidsMax)
		}
		if quota > 0 {
			cpuQuota = strconv.FormatInt(quota, 10)
		}
		if l.CPUWeight > 0 {
			shares = strconv.FormatUint(l.CPUShares(), 10)
		}
		return []setting{
			{"memory", "memory.limit_in_bytes", mem, l.MemoryMax > 0},
			{"pids", "pids.max", pids, l.PidsMax > 0},
			// The period first: the kernel checks a quota against it.
			{"cpu", "cpu.cfs_period_us", strconv.Itoa(cfsPeriod), quota > 0},
			{"cpu", "cpu.cfs_quota_us", cpuQuota, quota > 0},
			{"cpu", "cpu.shares", shares, l.CPUWeight > 0},
		}, nil
	}
	mem, pids, cpuMax, weight := "max", "max", fmt.Sprintf("max %d", cfsPeriod), "100"
	if l.MemoryMax > 0 {
		mem = strconv.FormatInt(l.MemoryMax, 10)
	}
	if l.PidsMax > 0 {
		pids = strconv.Itoa(l.PidsMax)
	}
	if quota > 0 {
		cpuMax = fmt.Sprintf("%d %d", quota, cfsPeriod)
	}
	if l.CPUWeight > 0 {
		weight = strconv.Itoa(l.CPUWeight)
	}
	return []setting{
		{"memory", "memory.max", mem, l.MemoryMax > 0},
		{"pids", "pids.max", pids, l.PidsMax > 0},
		{"cpu", "cpu.max", cpuMax, quota > 0},
		{"cpu", "cpu.weight", weight, l.CPUWeight > 0},
	}, nil
}

// applicable drops the resets a missing controller makes moot, and refuses
// a limit it cannot enforce: a workload silently running unlimited is
// worse than one that does not start.
func (c *Cgroups) applicable(sets []setting) ([]setting, error) {
	var out []setting
	for _, s := range sets {
		switch {
		case slices.Contains(c.ctrls, s.ctrl):
			out = append(out, s)
		case s.limit:
			return nil, fmt.Errorf("%s needs the %s cgroup controller, which this host does not offer flyd: %w", s.file, s.ctrl, errdefs.ErrUnavailable)
		}
	}
	return out, nil
}

func (g *Cgroup) apply(sets []setting) error {
	for _, s := range sets {
		if err := writeCgroupFile(filepath.Join(g.dirFor(s.ctrl), s.file), s.value); err != nil {
			return err
		}
	}
	return nil
}

// dirFor is the cgroup's directory in the hierarchy of ctrl, "" if the
// host has none or the cgroup is not made there.
func (g *Cgroup) dirFor(ctrl string) string {
	if g.cg.l.version == 2 {
		return g.dirs[0]
	}
	for i, h := range g.cg.l.hier {
		if h.ctrl == ctrl && g.in[i] {
			return g.dirs[i]
		}
	}
	return ""
}

// thaw undoes a freeze that a kill cut short (a daemon that died in the
// middle): a frozen cgroup would freeze every child born into it, and on
// v1 the daemon's own starting thread.
func (g *Cgroup) thaw() error {
	if g.cg.l.version == 1 {
		if d := g.dirFor("freezer"); d != "" {
			return writeCgroupFile(filepath.Join(d, "freezer.state"), "THAWED")
		}
		return nil
	}
	err := writeCgroupFile(filepath.Join(g.dirs[0], "cgroup.freeze"), "0")
	if errors.Is(err, fs.ErrNotExist) { // before Linux 5.2
		return nil
	}
	return err
}
