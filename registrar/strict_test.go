package registrar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registry/contracttest"
	"github.com/flyd-dev/flyd/registryclient"
)

// contractRegistry is a registry for the registrar to talk to over HTTP
// with a real client: one that follows the contract to the letter, or
// flyd's own. It counts the requests of each route and the 410s.
type contractRegistry struct {
	client   *registryclient.Client
	strict   *contracttest.Registry // nil for flyd's
	requests map[string]*atomic.Int64
	gone     atomic.Int64
	down     atomic.Bool // flyd's: connections closed without an answer
}

func (c *contractRegistry) count(route string) int64 { return c.requests[route].Load() }

func (c *contractRegistry) setDown(down bool) {
	if c.strict != nil {
		c.strict.SetDown(down)
	}
	c.down.Store(down)
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func newContractRegistry(t *testing.T, strict bool) *contractRegistry {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "registry.key")
	key, _, err := registry.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &contractRegistry{requests: map[string]*atomic.Int64{}}
	for _, r := range []string{"register", "heartbeat", "deregister", "services"} {
		c.requests[r] = &atomic.Int64{}
	}
	var h http.Handler
	if strict {
		c.strict = contracttest.New(key)
		h = c.strict
	} else {
		srv, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		h = srv.Handler()
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.down.Load() && c.strict == nil {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		route := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if n := c.requests[route]; n != nil {
			n.Add(1)
		}
		sr := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sr, r)
		if sr.status == http.StatusGone {
			c.gone.Add(1)
		}
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	c.client, err = registryclient.New(hs.URL, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.client.Close)
	return c
}

// eachRegistry runs f against a registry that follows the contract to
// the letter and against flyd's own.
func eachRegistry(t *testing.T, f func(t *testing.T, c *contractRegistry)) {
	for _, strict := range []bool{true, false} {
		name := "flyd"
		if strict {
			name = "strict"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newContractRegistry(t, strict))
		})
	}
}

func runRegistrar(t *testing.T, r *Registrar) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// 12 instances on a 3 s lease for 4 s: each registered once and renewed
// by heartbeats, on a registry that knows no batch as on one that does
// (which gets them in batches). A registry that answers a batch heartbeat
// 410, as the contract's does, once had every instance registered again
// at every period and never renewed.
func TestHeartbeatsOnAnyRegistry(t *testing.T) {
	eachRegistry(t, func(t *testing.T, c *contractRegistry) {
		r := New(Config{Registry: c.client})
		var ins []registryclient.Instance
		for i := range 12 {
			ins = append(ins, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "127.0.0.1", Port: 1 + i, Healthy: true, TTL: int64(3 * time.Second)})
		}
		r.Set("w", ins)
		runRegistrar(t, r)
		time.Sleep(4 * time.Second)
		st := r.Stats()
		if st.Registered != 12 || st.Failing != 0 || st.Heartbeats < 12 {
			t.Fatalf("stats %+v", st)
		}
		if n := c.gone.Load(); n != 0 {
			t.Fatalf("%d answers 410", n)
		}
		if c.strict != nil {
			if n := c.count("register"); n != 12 {
				t.Fatalf("%d registers of 12 instances; want 12", n)
			}
			if n := c.count("heartbeat"); n != int64(st.Heartbeats) {
				t.Fatalf("%d heartbeat requests for %d heartbeats: one each on a registry without the extension", n, st.Heartbeats)
			}
		} else if n := c.count("heartbeat"); n*3 > int64(st.Heartbeats) {
			t.Fatalf("%d heartbeat requests for %d heartbeats: not batched on flyd's registry", n, st.Heartbeats)
		}
		t.Logf("%d registers, %d heartbeats in %d requests", c.count("register"), st.Heartbeats, c.count("heartbeat"))
	})
}

// After an outage that lost every instance, the registry is caught up
// within moments of the first request it answers: the instances waiting
// out their backoff are retried then, not each at the end of its own.
func TestRecoveryAfterOutage(t *testing.T) {
	eachRegistry(t, func(t *testing.T, c *contractRegistry) {
		r := New(Config{Registry: c.client})
		var ins []registryclient.Instance
		for i := range 60 {
			ins = append(ins, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "127.0.0.1", Port: 1 + i, Healthy: true, TTL: int64(3 * time.Second)})
		}
		r.Set("w", ins)
		runRegistrar(t, r)
		eventually(t, 3*time.Second, "registered", func() bool { return r.Stats().Registered == len(ins) })
		c.setDown(true)
		eventually(t, 5*time.Second, "every instance failing", func() bool { return r.Stats().Failing == len(ins) })
		time.Sleep(5 * time.Second)
		if c.strict != nil {
			c.strict.Wipe()
		}
		c.setDown(false)
		back := time.Now()
		var first, last time.Duration
		eventually(t, 15*time.Second, "every instance registered again", func() bool {
			st := r.Stats()
			if first == 0 && st.Failing < len(ins) {
				first = time.Since(back)
			}
			return st.Failing == 0 && st.Registered == len(ins)
		})
		last = time.Since(back)
		t.Logf("the first instance back %v after the registry, the last %v", first.Round(time.Millisecond), last.Round(time.Millisecond))
		if last-first > 500*time.Millisecond {
			t.Fatalf("the last instance came back %v after the first", last-first)
		}
	})
}

// A daemon that starts deregisters what its earlier run left registered
// for workloads it no longer has, and nothing else: not another daemon's
// instances, not what it keeps, not what a Set wanted again before.
func TestSweepAfterCrash(t *testing.T) {
	eachRegistry(t, func(t *testing.T, c *contractRegistry) {
		of := func(owner string, n int) []registryclient.Instance {
			out := make([]registryclient.Instance, n)
			for i := range out {
				out[i] = registryclient.Instance{ID: fmt.Sprintf("flyd-h-%s-%d", owner, i), Name: owner, Address: "127.0.0.1", Port: 1 + i,
					Healthy: true, TTL: int64(30 * time.Second), Metadata: map[string]string{"flyd.workload": owner}}
			}
			return out
		}
		holds := func() map[string]bool {
			ins, err := c.client.Instances(context.Background(), false)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, in := range ins {
				out[in.ID] = true
			}
			return out
		}
		// The earlier run, and another daemon on the same registry.
		before, other := New(Config{Registry: c.client, Daemon: "d1"}), New(Config{Registry: c.client, Daemon: "d2"})
		for _, owner := range []string{"kept", "removed", "back"} {
			before.Set(owner, of(owner, 3))
		}
		other.Set("removed", of("elsewhere", 2))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { before.Run(ctx); done <- struct{}{} }()
		go func() { other.Run(ctx); done <- struct{}{} }()
		eventually(t, 3*time.Second, "registered", func() bool { return len(holds()) == 11 })
		cancel() // the daemon dies: nothing is deregistered
		<-done
		<-done

		after := New(Config{Registry: c.client, Daemon: "d1"})
		runRegistrar(t, after)
		after.Set("back", of("back", 3)) // wanted again before the sweep
		n, err := after.Sweep(context.Background(), func(in registryclient.Instance) bool { return in.Metadata["flyd.workload"] == "kept" })
		if err != nil || n != 3 {
			t.Fatalf("swept %d (%v); want the 3 of removed", n, err)
		}
		eventually(t, 3*time.Second, "removed's deregistered", func() bool { return len(holds()) == 8 })
		h := holds()
		want := append(append(of("kept", 3), of("back", 3)...), of("elsewhere", 2)...)
		for _, in := range want {
			if !h[in.ID] {
				t.Errorf("%s deregistered", in.ID)
			}
		}
		if st := after.Stats(); st.Desired != 3 || st.Failing != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}
