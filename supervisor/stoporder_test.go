package supervisor

import (
	"context"
	"slices"
	"testing"

	"github.com/flyd-dev/flyd/status"
)

// stoppedOrder is the order in which the named workloads began to stop,
// as the event history has it.
func stoppedOrder(s *Supervisor, since uint64) []string {
	var order []string
	s.events.replay(s.events.path, since, s.events.last(), func(ev status.Event) bool {
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
	defer s.Close()
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
	last := s.events.last()
	if _, err := s.Batch(ctx, ActionStop, BatchRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	if o := stoppedOrder(s, last); !before(o, "web", "app") || !before(o, "app", "db") || len(o) != 4 {
		t.Errorf("stop --all stopped %v; want web before app before db, and other too", o)
	}

	if got := s.stopLevels([]string{"db", "app", "web", "other", "nothing"}); len(got) != 3 ||
		!slices.Contains(got[0], "web") || !slices.Contains(got[0], "nothing") ||
		!slices.Equal(got[1], []string{"app"}) || !slices.Contains(got[2], "db") || !slices.Contains(slices.Concat(got...), "other") {
		t.Errorf("stopLevels = %v; want web (and a name not known) first, then app, then db, other in one of them", got)
	}
	if got := s.stopLevels([]string{"db", "other"}); len(got) != 1 {
		t.Errorf("stopLevels of workloads that depend on none of each other = %v; want one level", got)
	}

	if _, err := s.Batch(ctx, ActionStart, BatchRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"db", "app", "web"} {
		waitState(t, s, n, status.Running)
	}
	last = s.events.last()
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
