package netalloc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestAllocateTemporaryPortConcurrentNeverDuplicates(t *testing.T) {
	const workers, total = 8, 200
	m, dir := newManager(t)
	var (
		mu   sync.Mutex
		seen = map[int]string{}
		wg   sync.WaitGroup
	)
	errs := make(chan error, total)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < total; i += workers {
				holder := fmt.Sprintf("ep-%d", i)
				port, err := m.AllocateTemporaryPort(context.Background(), "host", nil, "w", holder)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if other, dup := seen[port]; dup {
					errs <- fmt.Errorf("port %d handed to %s and %s", port, other, holder)
				}
				seen[port] = holder
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != total || len(m.List()) != total {
		t.Fatalf("%d distinct ports, %d reservations; want %d", len(seen), len(m.List()), total)
	}
	reloaded, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(reloaded.List()); got != total {
		t.Errorf("reloaded table holds %d reservations, want %d", got, total)
	}
}

func TestAllocateTemporaryPortKeepsHolderPort(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	p1, err := m.AllocateTemporaryPort(ctx, "host", nil, "w", "http")
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := m.AllocateTemporaryPort(ctx, "host", nil, "w", "http"); err != nil || p2 != p1 {
		t.Errorf("second allocation for one holder = %d, %v; want %d", p2, err, p1)
	}
	fixed := freePort(t)
	if _, err := m.Assign(ctx, "host", nil, "w", []Request{{Endpoint: "grpc", Mode: ModeFixed, Port: fixed}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AllocateTemporaryPort(ctx, "host", nil, "w", "grpc"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("temporary port for an endpoint holding a fixed one: err = %v, want ErrConflict", err)
	}
}

// fakeProbe stands in for the kernel: it answers attempt n with
// answers[n] (the last answer repeats) and counts attempts.
type fakeProbe struct {
	answers  []probeAnswer
	attempts atomic.Int32
	onCall   func(attempt int)
}

type probeAnswer struct {
	port     int
	err      error
	closeErr error
}

func (f *fakeProbe) bind() (loopbackProbe, error) {
	n := int(f.attempts.Add(1))
	if f.onCall != nil {
		f.onCall(n)
	}
	a := f.answers[min(n, len(f.answers))-1]
	if a.err != nil {
		return loopbackProbe{}, a.err
	}
	return loopbackProbe{port: a.port, close: func() error { return a.closeErr }}, nil
}

func TestTemporaryPortFailureModes(t *testing.T) {
	const reserved, free = 40001, 40002
	tests := []struct {
		name         string
		answers      []probeAnswer
		wantPort     int
		wantErr      error // and, when not nil,
		wantCause    error // the cause it wraps
		wantAttempts int
	}{
		{"collisions then free", []probeAnswer{{port: reserved}, {port: reserved}, {port: reserved}, {port: free}}, free, nil, nil, 4},
		{"always colliding", []probeAnswer{{port: reserved}}, 0, ErrTemporaryPortUnavailable, errCollision, maxAttempts},
		{"close fails then works", []probeAnswer{{port: free, closeErr: unix.EINTR}, {port: free}}, free, nil, nil, 2},
		{"close always fails", []probeAnswer{{port: free, closeErr: unix.EIO}}, 0, ErrTemporaryPortUnavailable, unix.EIO, maxAttempts},
		{"EMFILE", []probeAnswer{{err: unix.EMFILE}}, 0, ErrTemporaryPortUnavailable, unix.EMFILE, maxAttempts},
		{"ENFILE", []probeAnswer{{err: unix.ENFILE}}, 0, ErrTemporaryPortUnavailable, unix.ENFILE, maxAttempts},
		{"ENOBUFS then free", []probeAnswer{{err: unix.ENOBUFS}, {port: free}}, free, nil, nil, 2},
		{"EADDRNOTAVAIL", []probeAnswer{{err: unix.EADDRNOTAVAIL}}, 0, ErrTemporaryPortUnsupported, unix.EADDRNOTAVAIL, 1},
		{"ENETUNREACH", []probeAnswer{{err: unix.ENETUNREACH}}, 0, ErrTemporaryPortUnsupported, unix.ENETUNREACH, 1},
		{"EAFNOSUPPORT", []probeAnswer{{err: unix.EAFNOSUPPORT}}, 0, ErrTemporaryPortUnsupported, unix.EAFNOSUPPORT, 1},
		{"EPERM", []probeAnswer{{err: unix.EPERM}}, 0, ErrTemporaryPortUnsupported, unix.EPERM, 1},
		{"EACCES", []probeAnswer{{err: unix.EACCES}}, 0, ErrTemporaryPortUnsupported, unix.EACCES, 1},
		{"lo down", []probeAnswer{{err: errLoopbackDown}}, 0, ErrTemporaryPortUnsupported, errLoopbackDown, 1},
		{"EMFILE then lo down", []probeAnswer{{err: unix.EMFILE}, {err: errLoopbackDown}}, 0, ErrTemporaryPortUnsupported, errLoopbackDown, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t)
			if _, err := m.Assign(context.Background(), "host", nil, "other", []Request{{Endpoint: "x", Mode: ModeFixed, Port: reserved}}); err != nil {
				t.Skipf("port %d is busy on this host: %v", reserved, err)
			}
			f := &fakeProbe{answers: tt.answers}
			m.bindLoopback = f.bind
			port, err := m.AllocateTemporaryPort(context.Background(), "host", nil, "w", "http")
			if got := int(f.attempts.Load()); got != tt.wantAttempts {
				t.Errorf("%d attempts, want %d", got, tt.wantAttempts)
			}
			if tt.wantErr == nil {
				if err != nil || port != tt.wantPort {
					t.Fatalf("= %d, %v; want %d", port, err, tt.wantPort)
				}
				if list := m.List(); len(list) != 2 || list[1].Port != free {
					t.Errorf("table %v, want the free port reserved", list)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, tt.wantCause) {
				t.Fatalf("err = %v, want %v wrapping %v", err, tt.wantErr, tt.wantCause)
			}
			if len(m.List()) != 1 {
				t.Errorf("failed allocation left %v", m.List())
			}
		})
	}
}

func TestTemporaryPortCancelledMidRetry(t *testing.T) {
	m, _ := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeProbe{answers: []probeAnswer{{err: unix.EMFILE}}}
	f.onCall = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	m.bindLoopback = f.bind
	_, err := m.AllocateTemporaryPort(ctx, "host", nil, "w", "http")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := f.attempts.Load(); n != 2 {
		t.Errorf("%d attempts, want 2 (none after the cancel)", n)
	}
	// Cancelled before the first attempt: no attempt at all.
	f.attempts.Store(0)
	if _, err := m.AllocateTemporaryPort(ctx, "host", nil, "w", "http"); !errors.Is(err, context.Canceled) || f.attempts.Load() != 0 {
		t.Errorf("pre-cancelled: err = %v after %d attempts", err, f.attempts.Load())
	}
}

// TestTemporaryPortLoopbackDown uses a real fresh namespace, where lo is
// down: binding 127.0.0.1 there succeeds, yet nothing could connect, so it
// must be refused at the first attempt.
func TestTemporaryPortLoopbackDown(t *testing.T) {
	ns := &countingNS{inner: newNetns(t)}
	m, _ := newManager(t)
	_, err := m.AllocateTemporaryPort(context.Background(), "isolated", ns, "w", "http")
	if !errors.Is(err, ErrTemporaryPortUnsupported) {
		t.Fatalf("err = %v, want ErrTemporaryPortUnsupported", err)
	}
	if n := ns.calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	_, err = m.Assign(context.Background(), "isolated", ns, "w", []Request{{Endpoint: "http", Mode: ModeEphemeral}})
	if !errors.Is(err, ErrTemporaryPortUnsupported) || m.InUse("isolated") {
		t.Errorf("Assign: err = %v, table %v", err, m.List())
	}
}

// TestTemporaryPortNeverReturnsReserved narrows a namespace's ephemeral
// range to ten ports and reserves the five odd ones in the table, unbound
// as for a stopped workload. bind() prefers odd ports, so the kernel keeps
// offering reserved ones: flyd must refuse each and still find an even one
// within its attempts, because it keeps the colliding probes bound.
func TestTemporaryPortNeverReturnsReserved(t *testing.T) {
	const lo, hi = 41000, 41009
	netns := newNetns(t)
	netns.loUp(t)
	netns.portRange(t, lo, hi)
	ns := &countingNS{inner: netns}
	m, _ := newManager(t)
	reserved := map[int]bool{}
	var reqs []Request
	for p := lo + 1; p <= hi; p += 2 {
		reserved[p] = true
		reqs = append(reqs, Request{Endpoint: fmt.Sprint("p", p), Mode: ModeFixed, Port: p})
	}
	if _, err := m.Assign(context.Background(), "isolated", netns, "stopped", reqs); err != nil {
		t.Fatal(err)
	}
	const rounds = 8
	for i := range rounds {
		port, err := m.AllocateTemporaryPort(context.Background(), "isolated", ns, "w", "http")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if reserved[port] || port < lo || port > hi {
			t.Fatalf("round %d: got port %d, reserved or outside %d..%d", i, port, lo, hi)
		}
		if err := m.ReleasePort("isolated", port); err != nil {
			t.Fatal(err)
		}
	}
	// Attempts beyond one per round are collisions the table caught.
	if n := int(ns.calls.Load()); n <= rounds {
		t.Errorf("%d kernel probes for %d rounds: the kernel never offered a reserved port, the test proves nothing", n, rounds)
	}
	t.Logf("%d rounds, %d kernel probes", rounds, ns.calls.Load())
}
