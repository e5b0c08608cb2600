package project

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
)

// memStore is a journal's documents in memory: what a restarted daemon
// reads back is what the last one wrote.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Docs(kind string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, b := range s.m {
		if name, ok := strings.CutPrefix(k, kind+"/"); ok {
			out[name] = b
		}
	}
	return out
}

func (s *memStore) PutDoc(kind, name string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b == nil {
		delete(s.m, kind+"/"+name)
	} else {
		s.m[kind+"/"+name] = b
	}
	return nil
}

// told collects the events leases publish.
type told struct {
	mu  sync.Mutex
	evs []status.Event
}

func (t *told) publish(ev status.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evs = append(t.evs, ev)
}

func (t *told) of(project string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, ev := range t.evs {
		if ev.Project == project && ev.Type == status.EventProject {
			out = append(out, ev.Message)
		}
	}
	return out
}

// wait is of(project) once it says something, or after 5 s: the event of
// a down comes just after the project is gone.
func (t *told) wait(project string) []string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if msgs := t.of(project); len(msgs) > 0 {
			return msgs
		}
	}
	return t.of(project)
}

// upOne brings project up with one sleeper and a network.
func upOne(t *testing.T, p *Projects, project string) {
	t.Helper()
	w := sleeper("db")
	w.Network = "net"
	docs := Documents{Workloads: []*spec.Workload{w}, Docs: []spec.Document{&spec.Network{Kind: spec.KindNetwork, Name: "net"}}}
	if _, err := p.Up(context.Background(), project, docs, supervisor.ApplyOptions{Start: true}); err != nil {
		t.Fatalf("up %s: %v", project, err)
	}
}

// gone waits until nothing is left of project.
func gone(t *testing.T, p *Projects, project string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for p.has(context.Background(), project) {
		if time.Since(start) > within {
			t.Fatalf("project %s is still there %s on", project, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestLeaseLapses: a held project outlives its last hold by its grace,
// not more; a hold that comes back within the grace keeps it; one of
// another caller is refused; the project's down tells it and forgets the
// lease.
func TestLeaseLapses(t *testing.T) {
	_, p := open(t)
	store, ev := &memStore{m: map[string][]byte{}}, &told{}
	l := p.OpenLeases(store, ev.publish, zap.NewNop())
	defer l.Close()
	ctx := context.Background()
	o := LeaseOptions{Grace: time.Second}

	release, err := l.Hold(ctx, "ci-1", o)
	if err != nil {
		t.Fatal(err)
	}
	if len(store.Docs(leaseKind)) != 1 {
		t.Fatalf("the lease is not recorded: %v", store.Docs(leaseKind))
	}
	upOne(t, p, "ci-1")
	peer := authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true})
	if _, err := l.Hold(peer, "ci-1", o); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("another caller's hold of ci-1: %v; want a conflict", err)
	}
	if got := l.List(peer); len(got) != 0 {
		t.Errorf("a confined caller sees root's leases: %+v", got)
	}

	// Let go, and back within the grace: kept.
	release()
	time.Sleep(300 * time.Millisecond)
	again, err := l.Hold(ctx, "ci-1", o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if !p.has(ctx, "ci-1") {
		t.Fatal("a project held again within its grace was taken down")
	}
	if ls := l.List(ctx); len(ls) != 1 || !ls[0].Held {
		t.Errorf("leases: %+v; want ci-1 held", ls)
	}

	// Let go for good: gone after the grace, and said.
	again()
	again() // a release is once
	took := gone(t, p, "ci-1", 5*time.Second)
	if took < 900*time.Millisecond {
		t.Errorf("taken down %s after its last hold; its grace is 1s", took)
	}
	if msgs := ev.wait("ci-1"); len(msgs) != 1 || !strings.Contains(msgs[0], "its client went away") {
		t.Errorf("events: %q; want one saying its client went away", msgs)
	}
	if len(store.Docs(leaseKind)) != 0 || len(l.List(ctx)) != 0 {
		t.Errorf("the lease outlived its project: %v %+v", store.Docs(leaseKind), l.List(ctx))
	}
}

// TestLeaseAcrossRestart: a daemon that starts again gives a held lease
// its grace from then, and takes the project down when no client comes
// back; a timed lease keeps its time; a daemon stopping takes nothing down.
func TestLeaseAcrossRestart(t *testing.T) {
	_, p := open(t)
	store, ev := &memStore{m: map[string][]byte{}}, &told{}
	ctx := context.Background()
	l := p.OpenLeases(store, ev.publish, zap.NewNop())
	release, err := l.Hold(ctx, "ci-2", LeaseOptions{Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	upOne(t, p, "ci-3")
	if err := l.Renew(ctx, "ci-3", LeaseOptions{TTL: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	upOne(t, p, "ci-2")
	l.Close()
	release() // the daemon's stop cut the hold: no client went away
	time.Sleep(1200 * time.Millisecond)
	if !p.has(ctx, "ci-2") {
		t.Fatal("a project was taken down by a daemon that was stopping")
	}

	// The next daemon: ci-3's time is nearly up, ci-2 has its grace again.
	start := time.Now()
	l = p.OpenLeases(store, ev.publish, zap.NewNop())
	defer l.Close()
	gone(t, p, "ci-3", 3*time.Second)
	gone(t, p, "ci-2", 5*time.Second)
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("ci-2 taken down %s after the daemon was back; its grace is 1s", took)
	}
	if msgs := ev.wait("ci-3"); len(msgs) != 1 || !strings.Contains(msgs[0], "its lease ran out") {
		t.Errorf("ci-3's events: %q", msgs)
	}
}

// TestDownStale: down --stale takes down at once the projects no client
// holds, and leaves those held and those whose time is to come; a
// confined caller's are its own.
func TestDownStale(t *testing.T) {
	_, p := open(t)
	store := &memStore{m: map[string][]byte{}}
	l := p.OpenLeases(store, (&told{}).publish, zap.NewNop())
	defer l.Close()
	ctx := context.Background()
	for _, name := range []string{"held", "loose", "timed"} {
		upOne(t, p, name)
	}
	release, err := l.Hold(ctx, "held", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r2, err := l.Hold(ctx, "loose", LeaseOptions{Grace: MaxGrace})
	if err != nil {
		t.Fatal(err)
	}
	r2()
	if err := l.Renew(ctx, "timed", LeaseOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	peer := authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true})
	if chs, err := l.Stale(peer); err != nil || len(chs) != 0 {
		t.Errorf("a peer's down --stale: %v, %v; want nothing of root's", chs, err)
	}
	chs, err := l.Stale(ctx)
	if err != nil || len(chs) != 1 || chs["loose"] == nil || len(chs["loose"].Removed) != 1 {
		t.Fatalf("down --stale: %+v, %v; want loose alone", chs, err)
	}
	for name, want := range map[string]bool{"held": true, "loose": false, "timed": true} {
		if p.has(ctx, name) != want {
			t.Errorf("project %s there: %v, want %v", name, !want, want)
		}
	}
	if _, err := l.Hold(ctx, "x", LeaseOptions{Grace: time.Millisecond}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a grace of 1ms: %v; want invalid", err)
	}
	if err := l.Renew(ctx, "timed", LeaseOptions{}); err != nil {
		t.Errorf("ending timed's lease: %v", err)
	}
	if p.has(ctx, "timed") != true || len(l.List(ctx)) != 1 {
		t.Errorf("ending a lease took its project, or kept the lease: %+v", l.List(ctx))
	}
	for _, name := range []string{"held", "timed"} {
		if _, err := p.Down(ctx, name, supervisor.RemoveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.List(ctx)) != 0 {
		t.Errorf("a down left its project's lease: %+v", l.List(ctx))
	}
}
