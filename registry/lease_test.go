package registry

import (
	"context"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// R3: leases, heart-beats and expiry, step by step on the test's clock.
func TestR3Lease(t *testing.T) {
	type step struct {
		advance   time.Duration
		heartbeat int  // expected status; 0 = no heartbeat at this step
		listed    bool // listed after the step
	}
	tests := []struct {
		name       string
		defaultTTL time.Duration
		extra      string        // more fields of the registration
		ttl        time.Duration // the effective lease listed
		steps      []step
	}{
		{"registry default", DefaultTTL, "", DefaultTTL, []step{
			{89 * time.Second, 0, true},
			{2 * time.Second, 0, false},
			{0, http.StatusGone, false},
		}},
		{"own ttl renewed by heartbeats", DefaultTTL, `"ttl_ns":10000000000`, 10 * time.Second, []step{
			{9 * time.Second, http.StatusOK, true},
			{9 * time.Second, http.StatusOK, true},
			{10 * time.Second, 0, true}, // exactly at the deadline: not passed yet
			{time.Nanosecond, http.StatusGone, false},
		}},
		{"non-positive ttl takes the default", 5 * time.Second, `"ttl_ns":-7`, 5 * time.Second, []step{
			{6 * time.Second, http.StatusGone, false},
		}},
		{"default 0 never expires", 0, "", 0, []step{
			{1000 * time.Hour, http.StatusOK, true},
			{100000 * time.Hour, 0, true},
		}},
		{"own ttl with a never-expiring default", 0, `"ttl_ns":1000000000`, time.Second, []step{
			{2 * time.Second, http.StatusGone, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withDefaultTTL(tt.defaultTTL))
			body := `{"id":"i","name":"s","address":"h","port":1`
			if tt.extra != "" {
				body += "," + tt.extra
			}
			h.register(body + "}")
			if got := time.Duration(h.instances("")[0].TTL); got != tt.ttl {
				t.Fatalf("listed ttl %v; want %v", got, tt.ttl)
			}
			for i, st := range tt.steps {
				h.clk.Add(st.advance)
				if st.heartbeat != 0 {
					w := h.req(http.MethodPost, PathHeartbeat, `{"id":"i"}`)
					if w.Code != st.heartbeat {
						t.Fatalf("step %d: heartbeat HTTP %d %s; want %d", i, w.Code, w.Body, st.heartbeat)
					}
				}
				if listed := len(h.ids("")) == 1; listed != st.listed {
					t.Fatalf("step %d: listed %v; want %v", i, listed, st.listed)
				}
			}
		})
	}
}

func TestR3HeartbeatBumpsUpdatedAt(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		h.register(`{"id":"i","name":"s","address":"h","port":1}`)
		h.clk.Add(30 * time.Second)
		if c := h.heartbeat("i"); c != http.StatusOK {
			t.Fatalf("heartbeat: HTTP %d", c)
		}
		in := h.instances("")[0]
		if !in.UpdatedAt.Equal(t0.Add(30*time.Second)) || !in.RegisteredAt.Equal(t0) {
			t.Fatalf("registered_at %v updated_at %v", in.RegisteredAt, in.UpdatedAt)
		}
		if w := h.req(http.MethodPost, PathHeartbeat, `{"id":"nobody"}`); w.Code != http.StatusGone {
			t.Fatalf("unknown id: HTTP %d; want 410", w.Code)
		} else {
			errorMessage(t, w)
		}
	})
}

func TestR3Reap(t *testing.T) {
	h := newHarness(t)
	h.register(`{"id":"short","name":"s","address":"h","port":1,"ttl_ns":1000000000}`)
	h.register(`{"id":"long","name":"s","address":"h","port":2}`)
	h.register(`{"id":"other","name":"s","address":"h","port":3,"ttl_ns":1000000000}`)
	if n := h.s.Reap(h.clk.Now()); n != 0 {
		t.Fatalf("reaped %d live instances", n)
	}
	h.clk.Add(2 * time.Second)
	// Expired but not reaped yet: already gone for every caller.
	if got := h.ids(""); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("listed %v before the reaper ran", got)
	}
	if c := h.heartbeat("short"); c != http.StatusGone {
		t.Fatalf("heartbeat of an expired, unreaped instance: HTTP %d", c)
	}
	if n := h.s.Reap(h.clk.Now()); n != 1 { // "short" went with its heartbeat
		t.Fatalf("reaped %d; want 1", n)
	}
	if n := len(h.s.mem.all()); n != 1 {
		t.Fatalf("%d instances stored after the reap", n)
	}
}

// Serve runs the reaper every ReapInterval.
func TestReaperRunsInServe(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReapInterval = 5 * time.Millisecond })
	h.register(`{"id":"a","name":"s","address":"h","port":1,"ttl_ns":1000}`)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.s.Serve(ctx, l) }()
	h.clk.Add(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for len(h.s.mem.all()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reaper did not remove the expired instance")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
