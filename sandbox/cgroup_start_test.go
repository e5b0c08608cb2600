package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

// A child started through StartIn is in the cgroup from its first
// instruction: cat reads its own membership as soon as it runs, before
// anything could have moved it.
func TestStartInBornInside(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("born", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "cgroup")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cat := exec.Command("cat", "/proc/self/cgroup")
			cat.Stdout = f
			cat.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := g.StartIn(cat.SysProcAttr, cat.Start); err != nil {
				t.Fatal(err)
			}
			if err := cat.Wait(); err != nil {
				t.Fatal(err)
			}
			if cat.SysProcAttr.UseCgroupFD || !cat.SysProcAttr.Setsid {
				t.Errorf("StartIn left SysProcAttr changed: %+v", cat.SysProcAttr)
			}
			requireBornIn(t, out, g)

			sleep := exec.Command("sleep", "300")
			startIn(t, g, sleep)
			if !g.Contains(sleep.Process.Pid) {
				t.Error("Contains(child) = false")
			}
			if g.Contains(os.Getpid()) {
				t.Error("Contains(this process) = true")
			}
			if procs, err := g.Procs(); err != nil || !slices.Equal(procs, []int{sleep.Process.Pid}) {
				t.Errorf("Procs() = %v, %v; want [%d]", procs, err, sleep.Process.Pid)
			}
			fds := openFDCount(t)
			for range 5 {
				cmd := exec.Command("true")
				cmd.SysProcAttr = &syscall.SysProcAttr{}
				if err := g.StartIn(cmd.SysProcAttr, cmd.Start); err != nil {
					t.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			if got := openFDCount(t); got != fds {
				t.Errorf("%d descriptors open before StartIn, %d after", fds, got)
			}
			requireNoStrayThreads(t)
		})
	}
}

// Many goroutines starting children into several cgroups at once leave no
// thread of the daemon in any of them, and every child where it belongs.
func TestStartInThreadHygiene(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			var groups []*Cgroup
			for _, name := range []string{"one", "two", "three"} {
				g, err := c.Create(name, Limits{PidsMax: 100})
				if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
					t.Fatal(err)
				}
				if err != nil { // no pids controller: no limit then
					g, err = c.Create(name, Limits{})
				}
				if err != nil {
					t.Fatal(err)
				}
				groups = append(groups, g)
			}
			const goroutines, starts = 16, 8
			errs := make(chan error, 2*goroutines*starts)
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					for j := range starts {
						g := groups[(i+j)%len(groups)]
						cmd := exec.Command("sh", "-c", "exec cat /proc/self/cgroup")
						var out strings.Builder
						cmd.Stdout = &out
						cmd.SysProcAttr = &syscall.SysProcAttr{}
						if err := g.StartIn(cmd.SysProcAttr, cmd.Start); err != nil {
							errs <- err
							continue
						}
						if err := cmd.Wait(); err != nil {
							errs <- err
						}
						if !strings.Contains(out.String(), ":"+g.CgroupsPath()+"\n") {
							errs <- fmt.Errorf("child of %s ran in\n%s", g.Name, out.String())
						}
						// Locked, so that the thread the file names is still
						// ours when it is read, not lent to another StartIn.
						runtime.LockOSThread()
						here, err := os.ReadFile("/proc/thread-self/cgroup")
						runtime.UnlockOSThread()
						if err != nil || strings.Contains(string(here), "/"+c.parent+"/") {
							errs <- fmt.Errorf("after StartIn the caller's thread is in\n%s (%v)", here, err)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			requireNoStrayThreads(t)
		})
	}
}

// The main thread's cgroup is the daemon's as the rest of the system
// reads it (/proc/PID/cgroup): StartIn must never lend it to a workload.
func TestStartInNeverUsesMainThread(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("main", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			procFile := fmt.Sprintf("/proc/%d/cgroup", pid)
			enter := func(start func() error) error { return g.StartIn(&syscall.SysProcAttr{}, start) }
			neverOnMainThread(t, "a workload cgroup", 300, enter, func() bool {
				data, err := os.ReadFile(procFile)
				return err == nil && strings.Contains(string(data), "/"+c.parent+"/")
			})
		})
	}
}

func TestStartInOutcome(t *testing.T) {
	sentinel := errors.New("sentinel")
	tests := []struct {
		name      string
		start     func() error
		wantErr   error // checked with errors.Is; nil means success
		wantPanic string
		v1Only    bool // on v2 start runs on the caller's goroutine
	}{
		{"success", func() error { return nil }, nil, "", false},
		{"error passes through", func() error { return fmt.Errorf("wrapped: %w", sentinel) }, sentinel, "", false},
		{"exec failure passes through", func() error { return exec.Command("/nonexistent/binary").Start() }, os.ErrNotExist, "", false},
		{"panic re-raised in caller", func() error { panic("boom") }, nil, "boom", false},
		{"Goexit is an error", func() error { runtime.Goexit(); return nil }, nil, "", true},
	}
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("outcome", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tt := range tests {
				if tt.v1Only && c.Version() != 1 {
					continue
				}
				t.Run(tt.name, func(t *testing.T) {
					var err error
					panicked := func() (v any) {
						defer func() { v = recover() }()
						err = g.StartIn(&syscall.SysProcAttr{}, tt.start)
						return nil
					}()
					switch {
					case tt.wantPanic != "":
						if panicked == nil || !strings.Contains(fmt.Sprint(panicked), tt.wantPanic) {
							t.Fatalf("panic = %v, want one mentioning %q", panicked, tt.wantPanic)
						}
					case panicked != nil:
						t.Fatalf("unexpected panic: %v", panicked)
					case tt.name == "Goexit is an error":
						if err == nil {
							t.Fatal("StartIn reported success for a start that never returned")
						}
					case tt.wantErr == nil && err != nil:
						t.Fatal(err)
					case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					requireNoStrayThreads(t)
				})
			}
		})
	}
}

func TestStartInRefusals(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("refused", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			start := func() error { ran = true; return nil }
			if err := g.StartIn(nil, start); !errors.Is(err, errdefs.ErrInvalid) || ran {
				t.Errorf("StartIn(nil): err = %v, ran = %v; want ErrInvalid, not run", err, ran)
			}
			if _, err := g.Attr(&syscall.SysProcAttr{}); c.Version() == 1 && !errors.Is(err, errdefs.ErrNotImplemented) {
				t.Errorf("Attr on v1: err = %v, want ErrNotImplemented", err)
			}

			// A frozen cgroup (a kill cut short) would freeze the daemon's
			// starting thread on v1; Create thaws it.
			if err := g.setFrozenNow(true); err != nil {
				t.Fatal(err)
			}
			if c.Version() == 1 {
				if err := g.StartIn(&syscall.SysProcAttr{}, start); !errors.Is(err, errdefs.ErrConflict) || ran {
					t.Errorf("StartIn into a frozen cgroup: err = %v, ran = %v; want ErrConflict, not run", err, ran)
				}
			}
			if _, err := c.Create("refused", Limits{}); err != nil {
				t.Fatal(err)
			}
			if err := g.StartIn(&syscall.SysProcAttr{}, start); err != nil || !ran {
				t.Errorf("StartIn after Create thawed: err = %v, ran = %v", err, ran)
			}

			if err := g.Delete(); err != nil {
				t.Fatal(err)
			}
			ran = false
			if err := g.StartIn(&syscall.SysProcAttr{}, start); !errors.Is(err, errdefs.ErrNotFound) || ran {
				t.Errorf("StartIn into a deleted cgroup: err = %v, ran = %v; want ErrNotFound, not run", err, ran)
			}
			requireNoStrayThreads(t)
		})
	}
}

// TestStartInJoinsHierarchiesOfLimits: on v1 a cgroup is made in the
// primary hierarchy and in those of its limits only, and a child is born
// in exactly those; a later Create without the limits leaves them.
func TestStartInJoinsHierarchiesOfLimits(t *testing.T) {
	for _, tl := range testLayouts(t) {
		if tl.l.version != 1 || !hasControllers(tl.l) {
			continue
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			for _, tt := range []struct {
				name   string
				limits Limits
				in     []string
			}{
				{"every limit", benchLimits(tl.l), []string{"freezer", "memory", "pids", "cpu"}},
				{"memory only", Limits{MemoryMax: 64 << 20}, []string{"freezer", "memory"}},
				{"none", Limits{}, []string{"freezer"}},
			} {
				g, err := c.Create("joins", tt.limits)
				if err != nil {
					t.Fatal(err)
				}
				for i, h := range c.l.hier {
					_, err := os.Stat(g.dirs[i])
					if want := slices.Contains(tt.in, h.ctrl); (err == nil) != want || g.in[i] != want {
						t.Errorf("%s: cgroup in the %s hierarchy: exists %v, member %v; want %v", tt.name, h.ctrl, err == nil, g.in[i], want)
					}
				}
				out := filepath.Join(t.TempDir(), "cgroup")
				f, err := os.Create(out)
				if err != nil {
					t.Fatal(err)
				}
				cat := exec.Command("cat", "/proc/self/cgroup")
				cat.Stdout = f
				cat.SysProcAttr = &syscall.SysProcAttr{}
				if err := g.StartIn(cat.SysProcAttr, cat.Start); err != nil {
					t.Fatal(err)
				}
				if err := cat.Wait(); err != nil {
					t.Fatal(err)
				}
				f.Close()
				requireBornIn(t, out, g)
				if opened := mustOpen(t, c, "joins"); !slices.Equal(opened.in, g.in) {
					t.Errorf("%s: Open finds the cgroup in %v, Create made it in %v", tt.name, opened.in, g.in)
				}
			}
		})
	}
}

// requireBornIn checks a /proc/PID/cgroup copy: the child is in g in every
// hierarchy g is made in, and outside it in the others.
func requireBornIn(t *testing.T, file string, g *Cgroup) {
	t.Helper()
	paths, err := procCgroups(file, g.cg.l)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		if in := p == g.CgroupsPath(); in != g.in[i] {
			t.Errorf("child was born in %q in hierarchy %q; the cgroup %q is made there: %v", p, g.cg.l.hier[i].mount, g.CgroupsPath(), g.in[i])
		}
	}
}

// setFrozenNow freezes or thaws without waiting, as a dying daemon leaves it.
func (g *Cgroup) setFrozenNow(freeze bool) error {
	v1, v2 := "THAWED", "0"
	if freeze {
		v1, v2 = "FROZEN", "1"
	}
	if g.cg.l.version == 1 {
		return writeCgroupFile(filepath.Join(g.dirFor("freezer"), "freezer.state"), v1)
	}
	return writeCgroupFile(filepath.Join(g.Path, "cgroup.freeze"), v2)
}

func openFDCount(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(entries)
}
