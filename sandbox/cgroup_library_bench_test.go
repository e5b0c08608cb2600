package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// The cgroup layer here is flyd's own. These benchmarks put it beside
// containerd's cgroups library doing the same work on the same host, so
// that the choice is measured, not assumed: a cgroup's life with limits,
// and a run's whole life (create, start a process in it, kill what is
// left, delete). BENCHMARKS.md has the numbers and docs/architecture.md the reasons.

// libResources are benchLimits as the OCI resources the library takes.
func libResources(l Limits) *specs.LinuxResources {
	if l == (Limits{}) {
		return &specs.LinuxResources{}
	}
	mem, pids := l.MemoryMax, int64(l.PidsMax)
	period := uint64(100_000)
	quota, shares := int64(l.CPUMax*float64(period)), l.CPUShares()
	return &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: &shares},
		Pids:   &specs.LinuxPids{Limit: &pids},
	}
}

// libV1Hierarchy is the library's default hierarchy (every v1 controller
// mounted) narrowed to the controllers flyd uses, so that both sides make
// the same directories.
func libV1Hierarchy(l layout) cgroup1.Hierarchy {
	var ctrls []string
	for _, h := range l.hier {
		ctrls = append(ctrls, h.ctrl)
	}
	return func() ([]cgroup1.Subsystem, error) {
		all, err := cgroup1.Default()
		if err != nil {
			return nil, err
		}
		return slices.DeleteFunc(all, func(s cgroup1.Subsystem) bool {
			return !slices.Contains(ctrls, string(s.Name()))
		}), nil
	}
}

// libCgroup is one cgroup the library made, with what the benchmarks do
// to it.
type libCgroup struct {
	add    func(pid int) error
	kill   func() error
	delete func() error
}

// newLibCgroup makes the cgroup parent/name through the library, in the
// layout's hierarchies (v1) or its unified mount (v2).
func newLibCgroup(tb testing.TB, l layout, all bool, parent, name string, r *specs.LinuxResources) libCgroup {
	tb.Helper()
	if l.version == 1 {
		var opts []cgroup1.InitOpts
		if !all {
			opts = append(opts, cgroup1.WithHierarchy(libV1Hierarchy(l)))
		}
		cg, err := cgroup1.New(cgroup1.StaticPath("/"+parent+"/"+name), r, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		return libCgroup{
			add: func(pid int) error { return cg.Add(cgroup1.Process{Pid: pid}) },
			// The library has no kill on v1: freeze, signal each
			// process, thaw, as a caller must write it.
			kill: func() error {
				if err := cg.Freeze(); err != nil {
					return err
				}
				procs, err := cg.Processes(cgroup1.Freezer, true)
				if err != nil {
					return err
				}
				for _, p := range procs {
					_ = syscall.Kill(p.Pid, syscall.SIGKILL)
				}
				return cg.Thaw()
			},
			delete: cg.Delete,
		}
	}
	mount := l.hier[0].mount
	res := cgroup2.ToResources(r)
	m, err := cgroup2.NewManager(mount, "/"+parent+"/"+name, res)
	if err != nil {
		tb.Fatal(err)
	}
	return libCgroup{
		add:    func(pid int) error { return m.AddProc(uint64(pid)) },
		kill:   m.Kill,
		delete: m.Delete,
	}
}

// BenchmarkCgroupLibrary measures containerd's cgroups library doing what
// BenchmarkCgroupCreateDelete and BenchmarkStartIn measure of flyd's own
// layer: a cgroup with limits made and removed, and a run's whole life. On
// v1 "all" is the library's default (a directory in every mounted
// controller), "same" only the controllers flyd makes.
func BenchmarkCgroupLibrary(b *testing.B) {
	for _, tl := range testLayouts(b) {
		variants := []bool{false}
		if tl.l.version == 1 {
			variants = []bool{true, false}
		}
		for _, all := range variants {
			name := tl.name
			if tl.l.version == 1 {
				name += map[bool]string{true: "/all", false: "/same"}[all]
			}
			// The library makes its cgroups under the same kind of
			// parent flyd's tests use, removed with it at the end.
			c := newTestCgroups(b, tl.l)
			r := libResources(benchLimits(tl.l))
			b.Run(name+"/create-delete", func(b *testing.B) {
				i := 0
				for b.Loop() {
					g := newLibCgroup(b, tl.l, all, c.parent, fmt.Sprintf("lib-%d", i), r)
					i++
					if err := g.delete(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/create-start-kill-delete", func(b *testing.B) {
				for b.Loop() {
					g := newLibCgroup(b, tl.l, all, c.parent, "lib-run", r)
					// The library cannot start a process inside a
					// cgroup: it is started, then moved in.
					cmd := exec.Command("/bin/true")
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					if err := g.add(cmd.Process.Pid); err != nil && !gone(err) {
						b.Fatal(err)
					}
					if err := cmd.Wait(); err != nil {
						b.Fatal(err)
					}
					if err := g.kill(); err != nil {
						b.Fatal(err)
					}
					if err := g.delete(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// gone reports an error of moving a process that had already exited.
func gone(err error) bool {
	return strings.Contains(err.Error(), "no such process") || strings.Contains(err.Error(), "ESRCH")
}

// TestCgroupLibraryCleansUp checks the comparison itself: what the library
// made for a benchmark is gone after its delete, in every hierarchy, so
// the numbers are of a whole life and the run leaves nothing.
func TestCgroupLibraryCleansUp(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g := newLibCgroup(t, tl.l, false, c.parent, "lib", libResources(benchLimits(tl.l)))
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := g.add(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			if err := g.kill(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err == nil {
				t.Fatal("sleep 60 exited cleanly: the library's kill did not reach it")
			}
			if err := g.delete(); err != nil {
				t.Fatal(err)
			}
			for _, h := range tl.l.hier {
				dir, ok := h.dir("/" + c.parent + "/lib")
				if !ok {
					continue
				}
				if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is still there after the library's delete (%v)", dir, err)
				}
			}
		})
	}
}
