package usage

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

func TestLimitsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *spec.Resources
		want sandbox.Limits
		err  error
	}{
		{name: "none"},
		{name: "all", r: &spec.Resources{MemoryMax: 64 << 20, CPUMax: "0.5", CPUWeight: 200, PidsMax: 16},
			want: sandbox.Limits{MemoryMax: 64 << 20, CPUMax: 0.5, CPUWeight: 200, PidsMax: 16}},
		{name: "cores not a number", r: &spec.Resources{CPUMax: "half"}, err: errdefs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LimitsOf(tc.r)
			if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
				t.Fatalf("LimitsOf = %+v, %v; want %+v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestCgroupHook: a run gets its workload's cgroup with its limits,
// emptied of what an earlier run left, placed before it starts, and
// watched when it sets a limit; the cgroup outlives the run and goes with
// the workload.
func TestCgroupHook(t *testing.T) {
	cgs, g := testCgroups(t)
	// What an earlier run left in "idle".
	left := exec.Command("sleep", "60")
	left.SysProcAttr = &syscall.SysProcAttr{}
	if err := g.StartIn(left.SysProcAttr, left.Start); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- left.Wait() }()
	t.Cleanup(func() { _ = left.Process.Kill() })

	var placed []string
	l := NewLimits(cgs, nil)
	h := NewCgroupHook(cgs, l, func(name string) error { placed = append(placed, name); return nil }, zap.NewNop())
	sp := &spec.Workload{Name: "idle", Resources: &spec.Resources{PidsMax: 8}}
	r := &runhook.Run{Task: taskOf(sp)}
	if err := h.Prestart(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.Task.Cgroup == nil || r.Task.Limits.PidsMax != 8 {
		t.Fatalf("the run's cgroup %v, limits %+v", r.Task.Cgroup, r.Task.Limits)
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("what the earlier run left still runs")
	}
	if len(placed) != 1 || placed[0] != "idle" {
		t.Errorf("placed %v", placed)
	}
	if l.watched["idle"] == nil {
		t.Error("a workload with a pids limit is not watched")
	}
	runhook.Chain{h}.Exited(context.Background(), r)
	if _, err := cgs.Open("idle"); err != nil {
		t.Fatalf("the cgroup went with its run: %v", err)
	}
	// Its cleanup deletes it too: made again for it.
	h.Destroy(context.Background(), "idle")
	if _, err := cgs.Open("idle"); err == nil {
		t.Error("the cgroup outlived its workload")
	}
	if l.watched["idle"] != nil {
		t.Error("a removed workload is watched")
	}
	if _, err := cgs.Create("idle", sandbox.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func taskOf(sp *spec.Workload) driver.Task { return driver.Task{Workload: sp.Name, Spec: sp} }
