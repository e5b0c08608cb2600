package registrar

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Cancelling Run with requests in flight cancels them and returns at
// once; it deregisters nothing, so a daemon restart does not flap the
// registry.
func TestRunStopsPromptly(t *testing.T) {
	g := start(t, 4)
	registered := instances("w", 5, 30*time.Second)
	g.r.Set("w", registered)
	eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == 5 })

	g.fake.setLatency("register", time.Minute)
	g.r.Set("slow", instances("slow", 20, 30*time.Second))
	eventually(t, time.Second, "workers busy", func() bool { n, _ := g.fake.concurrency(); return n == 4 })

	begin := time.Now()
	g.stop()
	if d := time.Since(begin); d > 200*time.Millisecond {
		t.Errorf("Run took %v to return", d)
	}
	if n := g.fake.cancels(); n != 4 {
		t.Errorf("%d requests cancelled, want the 4 in flight", n)
	}
	if _, peak := g.fake.concurrency(); peak > 4 {
		t.Errorf("%d requests in flight at once, want <= 4 workers", peak)
	}
	if n := g.fake.count("deregister"); n != 0 {
		t.Errorf("%d deregisters on stop, want none", n)
	}
	if !holdsExactly(g.fake, ids(registered)...) {
		t.Errorf("registry holds %v after stop", g.fake.holds())
	}
}

// A second Run picks up where the first stopped: nothing is lost.
func TestRunAgainResumes(t *testing.T) {
	g := start(t, 2)
	g.fake.setLatency("register", time.Minute)
	in := instances("w", 3, 30*time.Second)
	g.r.Set("w", in)
	eventually(t, time.Second, "in flight", func() bool { n, _ := g.fake.concurrency(); return n == 2 })
	g.stop()

	g.fake.setLatency("register", 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, time.Second, "registered by the second Run", func() bool { return holdsExactly(g.fake, ids(in)...) })
}

func TestFlush(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		running bool // Flush while Run runs, or after it stopped
		down    bool // registry unreachable: Flush must give up with ctx
	}{
		{"after run", false, false},
		{"while running", true, false},
		{"after run, registry down", false, true},
		{"while running, registry down", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := start(t, 2)
			in := instances("w", 4, 30*time.Second)
			g.r.Set("w", in)
			eventually(t, time.Second, "registered", func() bool { return len(g.fake.holds()) == 4 })
			g.r.Set("never", instances("never", 1, 30*time.Second)) // may never reach the registry
			if !tc.running {
				g.stop()
			}
			if tc.down {
				g.fake.setDown(errRefused)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			begin := time.Now()
			err := g.r.Flush(ctx)
			if tc.down {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Flush with the registry down: %v, want a deadline error", err)
				}
				if d := time.Since(begin); d > time.Second {
					t.Errorf("Flush returned after %v, past its deadline", d)
				}
				if n := g.fake.count("deregister"); n < 4 || n > 4*4 {
					t.Errorf("%d deregister attempts, want a few per instance", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !holdsExactly(g.fake) {
				t.Errorf("registry still holds %v", g.fake.holds())
			}
			if s := g.r.Stats(); s.Desired != 0 || s.Registered != 0 {
				t.Errorf("stats after flush: %+v", s)
			}
		})
	}
}

func TestFlushEmpty(t *testing.T) {
	r := New(Config{Registry: newFake()})
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
