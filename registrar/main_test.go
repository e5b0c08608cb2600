package registrar

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flyd-dev/flyd/registryclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a registrar running against a fake registry for one test.
type rig struct {
	fake *fakeRegistry
	r    *Registrar
	logs *observer.ObservedLogs
	stop func() // cancels Run and waits for it; idempotent

	mu     sync.Mutex
	events []event // OnError calls
}

type event struct {
	owner, id string
	err       error
}

// start runs a registrar with workers workers until the test ends.
func start(t *testing.T, workers int) *rig {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	g := &rig{fake: newFake(), logs: logs}
	g.r = New(Config{
		Registry: g.fake,
		Logger:   zap.New(core),
		Workers:  workers,
		OnError: func(owner, id string, err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.events = append(g.events, event{owner, id, err})
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.r.Run(ctx) }()
	g.stop = func() { cancel(); <-done }
	t.Cleanup(g.stop)
	return g
}

func (g *rig) eventsFor(id string) []event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []event
	for _, e := range g.events {
		if e.id == id {
			out = append(out, e)
		}
	}
	return out
}

// instances builds n valid instances of owner with the given lease.
func instances(owner string, n int, ttl time.Duration) []registryclient.Instance {
	out := make([]registryclient.Instance, n)
	for i := range out {
		out[i] = instance(fmt.Sprintf("flyd-host-%s-ep%d", owner, i), ttl)
	}
	return out
}

func instance(id string, ttl time.Duration) registryclient.Instance {
	return registryclient.Instance{
		ID: id, Name: "svc", Address: "127.0.0.1", Port: 8080, Protocol: "tcp",
		Tags: []string{"api=http"}, Metadata: map[string]string{"flyd.workload": "w"},
		Healthy: true, TTL: int64(ttl),
	}
}

func ids(in []registryclient.Instance) []string {
	out := make([]string, len(in))
	for i := range in {
		out[i] = in[i].ID
	}
	return out
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdsExactly reports whether the fake holds exactly want.
func holdsExactly(f *fakeRegistry, want ...string) bool {
	got := f.holds()
	if len(got) != len(want) {
		return false
	}
	for _, id := range want {
		if _, ok := got[id]; !ok {
			return false
		}
	}
	return true
}
