package registrar

import (
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// A registry down for longer than a lease: attempts back off (a handful
// per instance, not a tight loop), the workload side never notices, and
// when it returns the registry is brought to the desired set, including
// changes made during the outage.
func TestRegistryDownCatchesUp(t *testing.T) {
	// Any error that is none of registryclient's sentinels is "down"
	// (TestClassify); one kind is enough here.
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"connection refused", errRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t, 4)
			const ttl = 300 * time.Millisecond
			kept := instances("w", 3, ttl)         // desired throughout
			removed := instances("gone", 2, ttl)   // registered, removed while down
			added := instances("new", 2, ttl)      // added while down
			ephemeral := instances("blip", 1, ttl) // added and removed while down
			g.r.Set("w", kept)
			g.r.Set("gone", removed)
			eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == 5 })

			g.fake.setDown(tc.err)
			before := g.fake.total()
			g.r.Set("gone", nil)
			g.r.Set("new", added)
			g.r.Set("blip", ephemeral)
			time.Sleep(100 * time.Millisecond)
			g.r.Set("blip", nil)
			time.Sleep(1400 * time.Millisecond) // > 4 leases

			attempts := g.fake.total() - before
			// Each of the 8 ids: first try, then waits of >= 250ms, 500ms,
			// 1s… — at most ~5 tries in 1.5 s. A tight loop would be
			// thousands.
			if attempts > 8*6 {
				t.Errorf("%d attempts in 1.5 s while down: not backing off", attempts)
			}
			if s := g.r.Stats(); s.Failing == 0 || s.Registered != 0 || s.LastError == "" {
				t.Errorf("stats while down: %+v", s)
			}

			g.fake.setDown(nil)
			want := append(ids(kept), ids(added)...)
			eventually(t, 5*time.Second, "caught up", func() bool { return holdsExactly(g.fake, want...) })
			eventually(t, 3*time.Second, "failing entries settled", func() bool {
				s := g.r.Stats()
				return s.Desired == 5 && s.Registered == 5 && s.Failing == 0
			})
			if n := g.fake.landedID(ephemeral[0].ID, "register"); n != 0 {
				t.Errorf("the instance added and removed during the outage was registered %d times", n)
			}
			// Every failing instance was reported once failing, once recovered.
			for _, id := range want {
				ev := g.eventsFor(id)
				if len(ev) != 2 || ev[0].err == nil || ev[1].err != nil {
					t.Errorf("%s: events %v, want one failure then one recovery", id, ev)
				}
			}
			// The registrar forgot the removed ids once the registry did.
			g.r.mu.Lock()
			n := len(g.r.entries)
			g.r.mu.Unlock()
			if n != 5 {
				t.Errorf("%d entries tracked, want 5", n)
			}
		})
	}
}

// A refused key is retried rarely and reported once, not per retry.
func TestUnauthorizedBacksOffLong(t *testing.T) {
	t.Parallel()
	g := start(t, 2)
	g.fake.setDenied(true)
	in := instances("w", 3, 300*time.Millisecond)
	g.r.Set("w", in)
	time.Sleep(1500 * time.Millisecond)
	if n := g.fake.total(); n < 3 || n > 6 {
		t.Errorf("%d attempts in 1.5 s with a refused key, want 3..6 (first try, then >= 2.5 s apart)", n)
	}
	if n := g.logs.FilterMessage("registrar: registry request failing").Len(); n != 3 {
		t.Errorf("%d failure lines, want one per instance", n)
	}
	for _, id := range ids(in) {
		if ev := g.eventsFor(id); len(ev) != 1 || ev[0].err == nil {
			t.Errorf("%s: events %v, want one failure", id, ev)
		}
	}
	// A Set does not pull a refused retry forward.
	changed := instances("w", 3, 300*time.Millisecond)
	changed[0].Healthy = false
	g.r.Set("w", changed)
	time.Sleep(100 * time.Millisecond)
	if n := g.fake.total(); n > 6 {
		t.Errorf("%d attempts: a Set defeated the backoff", n)
	}
}

// Content the registry refuses (400) waits for new content, which is
// tried at once.
func TestBadRequestRetriedOnNewContent(t *testing.T) {
	g := start(t, 2)
	bad := instance("x", 30*time.Second)
	bad.Port = 0
	g.r.Set("w", []registryclient.Instance{bad})
	eventually(t, time.Second, "tried", func() bool { return g.fake.count("register") == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := g.fake.count("register"); n != 1 {
		t.Fatalf("%d attempts of refused content, want 1", n)
	}
	g.r.Set("w", []registryclient.Instance{instance("x", 30*time.Second)})
	eventually(t, 300*time.Millisecond, "fixed content registered", func() bool { return holdsExactly(g.fake, "x") })
}

// An id wanted again while its deregister is pending is registered, and
// the deregister never lands: level-triggered, the last word wins.
func TestRedesiredDuringPendingDeregister(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pending func(*rig) // makes the next deregister hang or fail
		release func(*rig)
		settled func(*rig, string) bool
	}{
		{"deregister in flight",
			func(g *rig) { g.fake.setLatency("deregister", time.Minute) },
			func(*rig) {},
			// The cancelled deregister may have landed: register again.
			func(g *rig, id string) bool { return g.fake.landedID(id, "register") == 2 && g.fake.cancels() == 1 }},
		{"deregister backing off",
			func(g *rig) { g.fake.setDown(errRefused) },
			func(g *rig) { g.fake.setDown(nil) },
			// The lease never lapsed: renewing it is all there is to do.
			func(g *rig, id string) bool { return g.fake.landedID(id, "heartbeat") >= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := start(t, 2)
			in := instances("w", 1, 30*time.Second)
			g.r.Set("w", in)
			eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, in[0].ID) })

			tc.pending(g)
			g.r.Set("w", nil)
			eventually(t, time.Second, "deregister attempted", func() bool { return g.fake.count("deregister") >= 1 })
			g.r.Set("w", in)
			tc.release(g)

			eventually(t, 3*time.Second, "settled", func() bool { return tc.settled(g, in[0].ID) })
			time.Sleep(100 * time.Millisecond)
			if !holdsExactly(g.fake, in[0].ID) {
				t.Errorf("registry holds %v", g.fake.holds())
			}
			if n := g.fake.landedID(in[0].ID, "deregister"); n != 0 {
				t.Errorf("%d deregisters landed", n)
			}
			if s := g.r.Stats(); s.Desired != 1 || s.Registered != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// A deregister the registry does not know (404) is done, not failing.
func TestDeregisterNotFoundIsDone(t *testing.T) {
	g := start(t, 2)
	in := instances("w", 2, 30*time.Second)
	g.r.Set("w", in)
	eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == 2 })
	g.fake.wipe()
	g.r.Set("w", nil)
	eventually(t, time.Second, "forgotten", func() bool {
		g.r.mu.Lock()
		defer g.r.mu.Unlock()
		return len(g.r.entries) == 0
	})
	if n := g.fake.count("deregister"); n != 2 {
		t.Errorf("%d deregisters, want 2", n)
	}
	if s := g.r.Stats(); s.Failures != 0 || s.Failing != 0 {
		t.Errorf("stats %+v: a 404 is not a failure", s)
	}
}
