package usage

import (
	"context"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/sandbox/cgtest"
	"github.com/flyd-dev/flyd/status"
)

// testCgroups is a parent of this test's own with one empty cgroup,
// "idle", both removed at the end of the test.
func testCgroups(t *testing.T) (*sandbox.Cgroups, *sandbox.Cgroup) {
	t.Helper()
	return cgtest.New(t, "idle", sandbox.Limits{MemoryMax: 64 << 20, PidsMax: 8})
}

// TestSample: the running workloads' usage, by name, a workload without
// a cgroup or without a run left out; read again only once the interval
// has passed.
func TestSample(t *testing.T) {
	cgs, _ := testCgroups(t)
	asked := 0
	s := NewSampler(cgs, func() []status.Workload {
		asked++
		return []status.Workload{{Name: "idle", PID: 1}, {Name: "gone", PID: 2}, {Name: "stopped"}}
	})
	stopped, err := cgs.Create("stopped", sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopped.Delete() }) // before the parent's
	st := s.Sample()
	if len(st.Workloads) != 1 || st.Workloads[0].Workload != "idle" || st.Workloads[0].Procs != 0 || st.Interval != Interval {
		t.Fatalf("sample %+v", st)
	}
	if again := s.Sample(); !again.At.Equal(st.At) || asked != 1 {
		t.Errorf("sampled again within the interval: asked %d times", asked)
	}

	none := NewSampler(nil, func() []status.Workload { t.Fatal("no cgroups, yet asked what runs"); return nil })
	if st := none.Sample(); st.Workloads == nil || len(st.Workloads) != 0 || time.Since(st.At) > time.Minute {
		t.Errorf("without cgroups: %+v", st)
	}
}

// TestHits: hits are counted from the first look, or the baseline a
// launch took; counters that went back (a cgroup made again) count none.
func TestHits(t *testing.T) {
	var h Hits
	if oom, pids := h.since(3, 5); oom != 0 || pids != 0 {
		t.Errorf("first look: %d %d, want none: an earlier daemon's hits", oom, pids)
	}
	if oom, pids := h.since(4, 5); oom != 1 || pids != 0 {
		t.Errorf("one OOM kill: %d %d", oom, pids)
	}
	if oom, pids := h.since(0, 2); oom != 0 || pids != 0 {
		t.Errorf("counters gone back: %d %d", oom, pids)
	}

	_, g := testCgroups(t)
	var fresh Hits
	fresh.Baseline(g)
	if !fresh.known {
		t.Fatal("no baseline taken")
	}
	if oom, pids, err := fresh.Look(g); err != nil || oom != 0 || pids != 0 {
		t.Errorf("an idle cgroup: %d %d %v", oom, pids, err)
	}
}

// TestLimitsWatchesOnlyWhatItIsTold: a watched workload whose counters
// did not move and one without a cgroup yet report no hit; the counting
// of an unwatched one is forgotten, and without cgroups Run returns at
// once.
func TestLimitsWatchesOnlyWhatItIsTold(t *testing.T) {
	cgs, g := testCgroups(t)
	hits := make(chan string, 4)
	l := NewLimits(cgs, func(name string, _, _ int, _ time.Time) { hits <- name })
	l.Watch("idle")
	l.Watch("no-run-yet")
	l.Baseline("idle", g)
	l.Baseline("not-watched", g)
	if h := l.watched["idle"]; h == nil || !h.known {
		t.Fatalf("idle's baseline: %+v", h)
	}
	if l.watched["not-watched"] != nil {
		t.Error("a baseline watched a workload")
	}
	ctx, cancel := context.WithTimeout(context.Background(), LimitCheck+LimitCheck/2)
	defer cancel()
	l.Run(ctx)
	select {
	case name := <-hits:
		t.Errorf("a hit of %s, whose counters did not move", name)
	default:
	}
	l.Unwatch("idle")
	if len(l.watched) != 1 {
		t.Errorf("watched after an unwatch: %v", l.watched)
	}

	done := make(chan struct{})
	go func() { defer close(done); NewLimits(nil, nil).Run(context.Background()) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run without cgroups did not return")
	}
}

// TestCounted: hits add to those shown, each kind with its last time,
// in a new count that leaves the one shown as it was.
func TestCounted(t *testing.T) {
	t0, t1 := time.Unix(100, 0), time.Unix(200, 0)
	first := Counted(nil, 2, 0, t0)
	if first.OOMKills != 2 || !first.LastOOMKill.Equal(t0) || first.PidsRefusals != 0 || first.LastRefusal != nil {
		t.Fatalf("first hits: %+v", first)
	}
	then := Counted(first, 0, 3, t1)
	if then.OOMKills != 2 || !then.LastOOMKill.Equal(t0) || then.PidsRefusals != 3 || !then.LastRefusal.Equal(t1) {
		t.Fatalf("then: %+v", then)
	}
	if first.PidsRefusals != 0 || first.LastRefusal != nil || then == first {
		t.Fatalf("the count shown changed: %+v", first)
	}
}
