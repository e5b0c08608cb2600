package supervisor

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/sandbox"

	"github.com/flyd-dev/flyd/spec"
)

// BenchmarkApplyToRunning is one Put of a new native workload until it is
// running (the exec done), then its removal: the supervisor's own cost on
// top of fork and exec, without and with a cgroup per workload.
func BenchmarkApplyToRunning(b *testing.B) {
	b.Run("no-cgroup", func(b *testing.B) { benchApply(b, nil) })
	b.Run("cgroup", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("cgroups need root")
		}
		cgs, err := sandbox.NewCgroups("flyd-bench-" + itoa(os.Getpid()))
		if err != nil {
			b.Skip(err)
		}
		defer cgs.RemoveParent()
		benchApply(b, cgs)
	})
}

func benchApply(b *testing.B, cgs *sandbox.Cgroups) {
	d := dirs{b.TempDir() + "/state", b.TempDir() + "/run"}
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: []driver.Driver{native.Driver{Cgroups: cgs}},
		Cgroups: cgs, StopOnClose: true})
	if err != nil {
		b.Fatal(err)
	}
	defer shut(s)
	ctx := context.Background()
	w := &spec.Workload{Name: "bench", Command: []string{"/bin/sleep", "100"}}
	w.SetDefaults()
	for b.Loop() {
		got, err := s.Apply(ctx, w, ApplyOptions{Start: true})
		if err != nil || got.State != "running" {
			b.Fatalf("%v %+v", err, got)
		}
		b.StopTimer()
		if err := s.Remove(ctx, "bench", RemoveOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkAdopt is a daemon restart with N running workloads: from
// opening the state until every one is adopted and running again. 200 is
// the bench's row; 2,000 shows how it grows towards the 10,000 row.
func BenchmarkAdopt(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(itoa(n), func(b *testing.B) { benchAdopt(b, n) })
	}
}

func benchAdopt(b *testing.B, n int) {
	d := dirs{b.TempDir() + "/state", b.TempDir() + "/run"}
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		w := &spec.Workload{Name: "w" + itoa(i), Command: []string{"/bin/sleep", "1000"}}
		w.SetDefaults()
		if _, err := s.Apply(ctx, w, ApplyOptions{Start: true}); err != nil {
			b.Fatal(err)
		}
	}
	pids := map[string]int{}
	list := s.List(ctx)
	for _, w := range list {
		pids[w.Name] = w.PID
	}
	for b.Loop() {
		shut(s)
		s, err = newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers()})
		if err != nil {
			b.Fatal(err)
		}
		for adopted := 0; adopted < n; {
			adopted = 0
			list := s.List(ctx)
			for _, w := range list {
				if w.State == "running" && w.PID == pids[w.Name] {
					adopted++
				}
			}
		}
	}
	b.StopTimer()
	s.cfg.StopOnClose = true
	shut(s)
}

// BenchmarkMemoryPerWorkload is what the supervisor keeps live for each
// of 500 running workloads without checks, applied in one batch: heap in
// use and goroutine stacks, after a collection, against the supervisor
// with none (bytes/wl).
func BenchmarkMemoryPerWorkload(b *testing.B) {
	const n = 500
	ctx := context.Background()
	changes := make([]Change, n)
	for i := range changes {
		w := &spec.Workload{Name: "w" + itoa(i), Command: []string{"/bin/sleep", "1000"}}
		w.SetDefaults()
		changes[i] = Change{Spec: w, Options: ApplyOptions{Start: true}}
	}
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	var per float64
	for b.Loop() {
		b.StopTimer()
		d := dirs{b.TempDir() + "/state", b.TempDir() + "/run"}
		s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers(), StopOnClose: true})
		if err != nil {
			b.Fatal(err)
		}
		before := inUse()
		b.StartTimer()
		outs, err := s.ApplyAll(ctx, changes)
		b.StopTimer()
		for _, o := range outs {
			if err == nil && o.Err != nil {
				err = o.Err
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		per = float64(int64(inUse())-int64(before)) / n
		shut(s)
		b.StartTimer()
	}
	b.ReportMetric(per, "bytes/wl")
}
