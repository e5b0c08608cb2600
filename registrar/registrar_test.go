package registrar

import (
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/status"
)

func TestRegisterOnSet(t *testing.T) {
	g := start(t, 4)
	want := instances("web", 3, 30*time.Second)
	g.r.Set("web", want)
	eventually(t, time.Second, "all three registered", func() bool { return holdsExactly(g.fake, ids(want)...) })
	for _, in := range want {
		got := g.fake.holds()[in.ID]
		if !sameContent(&got, &in) {
			t.Errorf("%s registered as %+v, want %+v", in.ID, got, in)
		}
	}
	eventually(t, time.Second, "stats", func() bool {
		s := g.r.Stats()
		return s.Desired == 3 && s.Registered == 3 && s.Failing == 0
	})
	if st := g.r.Status("https://registry:8500", "/etc/flyd/registry.key"); st.URL != "https://registry:8500" || st.KeyFile != "/etc/flyd/registry.key" || st.Desired != 3 || st.Registered != 3 {
		t.Errorf("status: %+v", st)
	}
	var off *Registrar
	if st := off.Status("", ""); st != (status.Registry{}) {
		t.Errorf("the status of no registrar: %+v", st)
	}
}

// Heartbeats go every third of the lease; counts are loose because the
// schedule is jittered and the machine may be busy. One registrar serves
// all the cases at once, as it would in the daemon.
func TestHeartbeatCadence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		owner  string
		ttl    time.Duration
		lo, hi int // heartbeats in the 1 s window
	}{
		{"ttl300ms", 300 * time.Millisecond, 6, 14}, // ~10
		{"ttl900ms", 900 * time.Millisecond, 2, 6},  // ~3.3
		{"ttl0", 0, 0, 0},                           // 0 means 30 s: none
	}
	g := start(t, 2)
	for _, tc := range cases {
		g.r.Set(tc.owner, instances(tc.owner, 1, tc.ttl))
	}
	eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == len(cases) })
	before := map[string]int{}
	for _, tc := range cases {
		before[tc.owner] = g.fake.countID(instances(tc.owner, 1, 0)[0].ID, "heartbeat")
	}
	time.Sleep(time.Second)
	for _, tc := range cases {
		id := instances(tc.owner, 1, 0)[0].ID
		if n := g.fake.countID(id, "heartbeat") - before[tc.owner]; n < tc.lo || n > tc.hi {
			t.Errorf("%s: %d heartbeats in 1 s, want %d..%d", tc.owner, n, tc.lo, tc.hi)
		}
		if n := g.fake.countID(id, "register"); n != 1 {
			t.Errorf("%s: %d registers, want 1", tc.owner, n)
		}
	}
}

// A registry that forgot everything answers the next heartbeat with 410;
// the registrar registers again at once, not after a backoff.
func TestWipeReregisters(t *testing.T) {
	t.Parallel()
	g := start(t, 2)
	in := instances("w", 5, 600*time.Millisecond) // heartbeat every ~200ms
	g.r.Set("w", in)
	eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, ids(in)...) })
	g.fake.wipe()
	start := time.Now()
	eventually(t, time.Second, "re-registered", func() bool { return holdsExactly(g.fake, ids(in)...) })
	if d := time.Since(start); d > 450*time.Millisecond {
		t.Errorf("re-registered after %v, want about one heartbeat period", d)
	}
	for _, in := range in {
		if n := g.fake.countID(in.ID, "register"); n != 2 {
			t.Errorf("%s registered %d times, want 2", in.ID, n)
		}
		if ev := g.eventsFor(in.ID); len(ev) != 0 {
			t.Errorf("%s: a 410 is not a failure, got events %v", in.ID, ev)
		}
	}
}

func TestSetChangedContentReregisters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		change  func(*registryclient.Instance)
		reissue bool
	}{
		{"healthy flipped", func(in *registryclient.Instance) { in.Healthy = false }, true},
		{"tags changed", func(in *registryclient.Instance) { in.Tags = append(in.Tags, "x=y") }, true},
		{"port changed", func(in *registryclient.Instance) { in.Port = 9090 }, true},
		{"metadata changed", func(in *registryclient.Instance) { in.Metadata["jet.domain"] = "a.example" }, true},
		{"ttl changed", func(in *registryclient.Instance) { in.TTL *= 2 }, true},
		{"same content", func(*registryclient.Instance) {}, false},
		{"only server stamps", func(in *registryclient.Instance) { in.UpdatedAt = time.Now() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := start(t, 2)
			in := instance("flyd-h-w-http", 30*time.Second)
			g.r.Set("w", []registryclient.Instance{in})
			eventually(t, time.Second, "registered", func() bool { return g.fake.count("register") == 1 })

			changed := instance(in.ID, 30*time.Second) // fresh slices and maps
			tc.change(&changed)
			g.r.Set("w", []registryclient.Instance{changed})
			if !tc.reissue {
				time.Sleep(200 * time.Millisecond)
				if n := g.fake.count("register"); n != 1 {
					t.Fatalf("%d registers after an unchanged Set, want 1", n)
				}
				return
			}
			eventually(t, 300*time.Millisecond, "re-registered", func() bool { return g.fake.count("register") == 2 })
			got := g.fake.holds()[in.ID]
			if !sameContent(&got, &changed) {
				t.Errorf("registry holds %+v, want %+v", got, changed)
			}
		})
	}
}

// The registrar owns its copy: a caller reusing its slices after Set must
// not change what is registered.
func TestSetCopiesInstances(t *testing.T) {
	g := start(t, 2)
	in := []registryclient.Instance{instance("a", 30*time.Second)}
	g.r.Set("w", in)
	in[0].Tags[0] = "mutated"
	in[0].Metadata["flyd.workload"] = "mutated"
	eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, "a") })
	got := g.fake.holds()["a"]
	if got.Tags[0] != "api=http" || got.Metadata["flyd.workload"] != "w" {
		t.Errorf("registered %+v: caller's later writes leaked in", got)
	}
}

func TestSetNilDeregistersOnlyThatOwner(t *testing.T) {
	for _, empty := range [][]registryclient.Instance{nil, {}} {
		g := start(t, 2)
		a, b := instances("a", 3, 30*time.Second), instances("b", 2, 30*time.Second)
		g.r.Set("a", a)
		g.r.Set("b", b)
		eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == 5 })
		g.r.Set("a", empty)
		eventually(t, time.Second, "a deregistered", func() bool { return holdsExactly(g.fake, ids(b)...) })
		if n := g.fake.count("deregister"); n != 3 {
			t.Errorf("%d deregisters, want 3", n)
		}
		eventually(t, time.Second, "stats", func() bool { s := g.r.Stats(); return s.Desired == 2 && s.Registered == 2 })
		g.stop()
	}
}

// Removing one instance of an owner keeps the others heart-beating.
func TestSetSubset(t *testing.T) {
	g := start(t, 2)
	in := instances("w", 3, 30*time.Second)
	g.r.Set("w", in)
	eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, ids(in)...) })
	g.r.Set("w", in[:2])
	eventually(t, time.Second, "third deregistered", func() bool { return holdsExactly(g.fake, ids(in[:2])...) })
	if n := g.fake.count("register"); n != 3 {
		t.Errorf("%d registers, want 3 (the kept ones untouched)", n)
	}
}

// An id another owner claims moves to it; the first owner's later Set
// without it must not deregister it.
func TestIDMovesBetweenOwners(t *testing.T) {
	t.Parallel()
	g := start(t, 2)
	in := instance("shared", 30*time.Second)
	g.r.Set("old", []registryclient.Instance{in})
	g.r.Set("new", []registryclient.Instance{in})
	g.r.Set("old", nil)
	eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, "shared") })
	time.Sleep(100 * time.Millisecond)
	if n := g.fake.count("deregister"); n != 0 {
		t.Errorf("%d deregisters of an id the new owner wants", n)
	}
	g.r.Set("new", nil)
	eventually(t, time.Second, "deregistered", func() bool { return holdsExactly(g.fake) })
}

// An instance without an id cannot be tracked and is ignored, loudly.
func TestSetIgnoresMissingID(t *testing.T) {
	g := start(t, 2)
	bad := instance("", 30*time.Second)
	g.r.Set("w", []registryclient.Instance{bad, instance("ok", 30*time.Second)})
	eventually(t, time.Second, "registered", func() bool { return holdsExactly(g.fake, "ok") })
	if n := g.logs.FilterMessage("registrar: instance without id ignored").Len(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}
