package supervisor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/status"
)

// stoppedOrder is the order in which the named workloads began to stop,
// as the event history has it.
func stoppedOrder(s *Supervisor, since uint64) []string {
	var order []string
	s.events.Replay(since, s.events.Last(), func(ev status.Event) bool {
		if ev.Type == status.EventState && ev.State == status.Stopping {
			order = append(order, ev.Workload)
		}
		return true
	})
	return order
}

// TestStopsGoDependentsFirst: a batch stop or remove, a down and a
// daemon that stops its workloads stop each dependent (by after or uses)
// before what it depends on, a level at a time; --parallel stops all at
// once.
func TestStopsGoDependentsFirst(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	apply := func() {
		db, app, web := fakeSpec("db", "run"), fakeSpec("app", "run"), fakeSpec("web", "run")
		app.After = []string{"db:started"}
		web.After = []string{"app:started"}
		other := fakeSpec("other", "run")
		if _, err := s.ApplyAll(ctx, []Change{{Spec: web, Options: ApplyOptions{Start: true}}, {Spec: app, Options: ApplyOptions{Start: true}},
			{Spec: db, Options: ApplyOptions{Start: true}}, {Spec: other, Options: ApplyOptions{Start: true}}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"db", "app", "web", "other"} {
			waitState(t, s, n, status.Running)
		}
	}
	before := func(order []string, a, b string) bool {
		return slices.Index(order, a) >= 0 && slices.Index(order, a) < slices.Index(order, b)
	}

	apply()
	last := s.events.Last()
	if _, err := s.Batch(ctx, ActionStop, BatchRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	if o := stoppedOrder(s, last); !before(o, "web", "app") || !before(o, "app", "db") || len(o) != 4 {
		t.Errorf("stop --all stopped %v; want web before app before db, and other too", o)
	}

	// One owner, one lane (without --peer-users every workload is root's).
	stopLevels := func(names []string) [][]string {
		t.Helper()
		lanes := s.stopLanes(names)
		if len(lanes) != 1 {
			t.Fatalf("stopLanes(%v) = %v; want one lane", names, lanes)
		}
		return lanes[0]
	}
	if got := stopLevels([]string{"db", "app", "web", "other", "nothing"}); len(got) != 3 ||
		!slices.Contains(got[0], "web") || !slices.Contains(got[0], "nothing") ||
		!slices.Equal(got[1], []string{"app"}) || !slices.Contains(got[2], "db") || !slices.Contains(slices.Concat(got...), "other") {
		t.Errorf("stopLevels = %v; want web (and a name not known) first, then app, then db, other in one of them", got)
	}
	if got := stopLevels([]string{"db", "other"}); len(got) != 1 {
		t.Errorf("stopLevels of workloads that depend on none of each other = %v; want one level", got)
	}

	if _, err := s.Batch(ctx, ActionStart, BatchRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"db", "app", "web"} {
		waitState(t, s, n, status.Running)
	}
	last = s.events.Last()
	rs, err := s.Batch(ctx, ActionRemove, BatchRequest{Names: []string{"db", "app", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Name != []string{"db", "app", "web"}[i] {
			t.Errorf("remove result %d: %+v", i, r)
		}
	}
	if o := stoppedOrder(s, last); !before(o, "web", "app") || !before(o, "app", "db") {
		t.Errorf("rm stopped %v; want web before app before db", o)
	}
}

// TestFollowersStopAndStartWithTheirPrerequisite: a workload whose after
// entry ends in +restart is stopped when the one it follows ends its run
// (a restart, a stop), says so, waits, and starts again once that one
// runs again; one that does not follow is left alone.
func TestFollowersStopAndStartWithTheirPrerequisite(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	db, app, loose := fakeSpec("db", "run"), fakeSpec("app", "run"), fakeSpec("loose", "run")
	app.After = []string{"db:started+restart"}
	loose.After = []string{"db:started"}
	if _, err := s.ApplyAll(ctx, []Change{{Spec: db, Options: ApplyOptions{Start: true}}, {Spec: app, Options: ApplyOptions{Start: true}},
		{Spec: loose, Options: ApplyOptions{Start: true}}}); err != nil {
		t.Fatal(err)
	}
	first := waitState(t, s, "app", status.Running).PID
	loosePID := waitState(t, s, "loose", status.Running).PID

	if _, err := s.Restart(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "app in a new run after db's restart", func() bool {
		w, _ := s.Get(ctx, "app")
		return w.State == status.Running && w.PID != first
	})
	if w, _ := s.Get(ctx, "loose"); w.PID != loosePID {
		t.Errorf("loose, which does not follow db, was restarted: pid %d, was %d", w.PID, loosePID)
	}

	if _, err := s.Stop(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	w := waitState(t, s, "app", status.Pending)
	if !contains(w.Reason, "waiting for db") {
		t.Errorf("app after db's stop: %s (%s); want pending, waiting for db", w.State, w.Reason)
	}
	follow := false
	s.events.Replay(0, s.events.Last(), func(ev status.Event) bool {
		follow = follow || ev.Type == status.EventFollow && ev.Workload == "app" && contains(ev.Message, "stopped with db")
		return true
	})
	if !follow {
		t.Error("no follow event says why app stopped")
	}
	if _, err := s.Start(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "app", status.Running)
}

// waitFor waits up to 10 s for ok.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		sleepBriefly()
	}
}
