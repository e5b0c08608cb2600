package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
)

// Kill leaves nothing alive, whatever session or process group the
// workload's processes moved to and however fast they fork.
func TestKillEverything(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		atLeast int // processes to wait for before killing
	}{
		{"setsid escapees", `setsid sleep 300 & setsid sh -c 'sleep 300 & sleep 300 & wait' & exec sleep 300`, 5},
		{"stopped and ignoring TERM", `trap '' TERM; sleep 300 & kill -STOP $!; setsid sh -c 'kill -STOP $$' & exec sleep 300`, 3},
		// Four shells forking as fast as they can: children appear while
		// Kill reads the list. PidsMax keeps it from taking the machine.
		// A loop's shell gives up when the pids limit refuses its fork:
		// the main one waits for them, then stays without forking.
		{"fork loops", `for i in 1 2 3 4; do (while :; do sleep 300 & done) & done; wait; exec sleep 300`, 100},
	}
	for _, tl := range testLayouts(t) {
		if !hasControllers(tl.l) {
			t.Logf("%s has no pids controller to keep a fork loop in bounds", tl.name)
			continue
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					g, err := c.Create("victim", Limits{PidsMax: 300})
					if err != nil {
						t.Fatal(err)
					}
					cmd := exec.Command("sh", "-c", tt.script)
					startIn(t, g, cmd)
					before := waitProcs(t, g, tt.atLeast)

					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					began := time.Now()
					if err := g.Kill(ctx); err != nil {
						t.Fatal(err)
					}
					t.Logf("killed %d+ processes in %v", len(before), time.Since(began))
					if procs, err := g.Procs(); err != nil || len(procs) != 0 {
						t.Fatalf("after Kill: Procs() = %v, %v", procs, err)
					}
					for _, p := range before {
						if survives(p) {
							t.Errorf("process %d survived Kill", p)
						}
					}
					var exit *exec.ExitError
					if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
						t.Errorf("workload ended with %v, want SIGKILL", err)
					}
					if err := g.Delete(); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// Without a pids controller a gentler fork loop shows the same.
func TestKillWithoutControllers(t *testing.T) {
	for _, tl := range testLayouts(t) {
		if hasControllers(tl.l) {
			continue // TestKillEverything covers it
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("victim", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `setsid sleep 300 & while :; do sleep 300 & sleep 0.01; done`)
			startIn(t, g, cmd)
			before := waitProcs(t, g, 20)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := g.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range before {
				if survives(p) {
					t.Errorf("process %d survived Kill", p)
				}
			}
		})
	}
}

// A workload restarts in the cgroup it was killed in. (Kernels with
// kill_seq kill every child cloned into a cgroup that cgroup.kill was
// once written to; Kill must not poison the cgroup so.)
func TestStartAfterKill(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("again", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for run := range 3 {
				cmd := exec.Command("sleep", "300")
				startIn(t, g, cmd)
				waitComm(t, cmd.Process.Pid, "sleep")
				if !g.Contains(cmd.Process.Pid) {
					t.Fatalf("run %d: the child is not in the cgroup", run)
				}
				if err := g.Kill(context.Background()); err != nil {
					t.Fatal(err)
				}
				var exit *exec.ExitError
				if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("run %d ended with %v, want SIGKILL", run, err)
				}
			}
		})
	}
}

func TestSignal(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("signalled", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			polite := []*exec.Cmd{exec.Command("sleep", "300"), exec.Command("sleep", "301")}
			for _, cmd := range polite {
				startIn(t, g, cmd)
			}
			// An ignored signal stays ignored across exec.
			deaf := exec.Command("sh", "-c", `trap '' TERM; exec sleep 302`)
			startIn(t, g, deaf)
			waitProcs(t, g, 3)
			waitComm(t, deaf.Process.Pid, "sleep") // the trap is set
			if err := g.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range polite {
				var exit *exec.ExitError
				if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
					t.Errorf("sleep ended with %v, want SIGTERM", err)
				}
			}
			if procs, err := g.Procs(); err != nil || !slices.Equal(procs, []int{deaf.Process.Pid}) {
				t.Errorf("after SIGTERM: Procs() = %v, %v; want only the deaf one, %d", procs, err, deaf.Process.Pid)
			}
		})
	}
}

// waitProcs waits until g holds at least n processes and returns them.
func waitProcs(tb testing.TB, g *Cgroup, n int) []int {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := g.Procs()
		if err != nil {
			tb.Fatal(err)
		}
		if len(procs) >= n {
			return procs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d processes in %s after 10s, want %d", len(procs), g.Name, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitComm waits until process p runs the program named comm.
func waitComm(tb testing.TB, p int, comm string) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(data)) == comm {
			return
		}
	}
	tb.Fatalf("process %d did not become %s within 10s", p, comm)
}

// A process that cannot die (here: frozen from above, as one in
// uninterruptible sleep cannot) makes Kill give up when ctx ends, saying
// so, and a later Kill finishes the job.
func TestKillGivesUpAtDeadline(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("stuck", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sleep", "300")
			startIn(t, g, cmd)
			parent := &Cgroup{Name: "parent", cg: c, dirs: []string{}, in: g.in}
			for _, d := range g.dirs {
				parent.dirs = append(parent.dirs, filepath.Dir(d))
			}
			parent.Path = parent.dirs[0]
			if err := parent.setFrozenNow(true); err != nil {
				t.Fatal(err)
			}
			thawed := false
			thaw := func() {
				if !thawed {
					thawed = true
					if err := parent.setFrozenNow(false); err != nil {
						t.Error(err)
					}
				}
			}
			defer thaw()

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			began := time.Now()
			err = g.Kill(ctx)
			took := time.Since(began)
			switch {
			case took > time.Second:
				t.Errorf("Kill took %v with a 300ms deadline", took)
			case err == nil:
				t.Logf("this kernel kills frozen tasks: nothing stays stuck")
			case !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 processes still inside"):
				t.Errorf("Kill at the deadline: %v; want DeadlineExceeded and the count", err)
			}
			thaw()
			if err := g.Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
			if survives(cmd.Process.Pid) {
				t.Error("sleep survived the second Kill")
			}
		})
	}
}

func TestKillEmptyReturnsAtOnce(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("empty", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for _, what := range []string{"empty", "missing"} {
				began := time.Now()
				if err := g.Kill(context.Background()); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(began); took > 20*time.Millisecond {
					t.Errorf("Kill of an %s cgroup took %v", what, took)
				}
				if err := g.Delete(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestClaimParent: one daemon at a time holds a parent; a second one given
// the same parent is refused, naming it, until the first lets go.
func TestClaimParent(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			release, err := c.Claim()
			if err != nil {
				t.Fatal(err)
			}
			other, err := newCgroups(c.parent, tl.l)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.Claim(); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), c.parent) {
				t.Fatalf("a second claim of %s: %v; want a conflict naming it", c.parent, err)
			}
			release()
			again, err := other.Claim()
			if err != nil {
				t.Fatalf("a claim after the release: %v", err)
			}
			again()
		})
	}
}
