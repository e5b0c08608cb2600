package supervisor

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// stopBatch is how many workloads BenchmarkStopAll stops at once.
const stopBatch = 200

// BenchmarkStopAll is `flyd stop --all` of 200 running native workloads
// (SIGTERM, which sleep dies of), beside the plain operation: the same
// processes signalled and waited for. Per op is the whole batch.
func BenchmarkStopAll(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		benchStopPlain(b, func(i int, cmd *exec.Cmd) error { return cmd.Start() })
	})
	b.Run("plain-cgroup", func(b *testing.B) {
		// The same, each process born in a cgroup of its own: what the
		// kernel's cgroups add to a stop, apart from flyd's reads.
		cgs := benchCgroups(b)
		defer cgs.RemoveParent()
		groups := make([]*sandbox.Cgroup, stopBatch)
		for i := range groups {
			g, err := cgs.Create("p"+itoa(i), sandbox.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Delete()
			groups[i] = g
		}
		benchStopPlain(b, func(i int, cmd *exec.Cmd) error {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			return groups[i].StartIn(cmd.SysProcAttr, cmd.Start)
		})
	})
	b.Run("no-cgroup", func(b *testing.B) { benchStopAll(b, nil) })
	b.Run("cgroup", func(b *testing.B) {
		cgs := benchCgroups(b)
		defer cgs.RemoveParent()
		benchStopAll(b, cgs)
	})
}

// benchStopPlain times SIGTERM to stopBatch sleeps and the wait for
// them all, each started (untimed) by start.
func benchStopPlain(b *testing.B, start func(i int, cmd *exec.Cmd) error) {
	cmds := make([]*exec.Cmd, stopBatch)
	for b.Loop() {
		b.StopTimer()
		for i := range cmds {
			cmds[i] = exec.Command("/bin/sleep", "1000")
			if err := start(i, cmds[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
}

// benchCgroups is a cgroup parent of the benchmark's own, or a skip.
func benchCgroups(b *testing.B) *sandbox.Cgroups {
	if os.Geteuid() != 0 {
		b.Skip("cgroups need root")
	}
	cgs, err := sandbox.NewCgroups("flyd-bench-" + itoa(os.Getpid()))
	if err != nil {
		b.Skip(err)
	}
	return cgs
}

func benchStopAll(b *testing.B, cgs *sandbox.Cgroups) {
	// State and run dirs on tmpfs, as the daemon's run dir is and as
	// scripts/bench keeps both: the disk's cost is not the stop's.
	shm, err := os.MkdirTemp("/dev/shm", "flyd-bench-")
	if err != nil {
		b.Skip(err)
	}
	defer os.RemoveAll(shm)
	d := dirs{shm + "/state", shm + "/run"}
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: []driver.Driver{native.Driver{Cgroups: cgs}},
		Cgroups: cgs, StopOnClose: true})
	if err != nil {
		b.Fatal(err)
	}
	defer shut(s)
	ctx := context.Background()
	for i := range stopBatch {
		w := &spec.Workload{Name: "w" + itoa(i), Command: []string{"/bin/sleep", "1000"}}
		w.SetDefaults()
		if _, err := s.Apply(ctx, w, ApplyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	all := BatchRequest{All: true, Parallel: true}
	// Removed at the end, so that their cgroups go before the parent.
	defer func() {
		if _, err := s.Batch(ctx, ActionRemove, BatchRequest{All: true, Parallel: true, Force: true}); err != nil {
			b.Error(err)
		}
	}()
	for b.Loop() {
		b.StopTimer()
		outs, err := s.Batch(ctx, ActionStart, all)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range outs {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
		}
		b.StartTimer()
		outs, err = s.Batch(ctx, ActionStop, all)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range outs {
			if o.Err != nil || o.Workload.State != "stopped" {
				b.Fatalf("%s: %v %+v", o.Name, o.Err, o.Workload)
			}
		}
	}
}
