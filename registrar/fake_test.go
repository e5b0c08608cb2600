package registrar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// errRefused is what a client returns when nothing listens: a transport
// error, wrapping none of registryclient's sentinels.
var errRefused = errors.New("dial tcp 127.0.0.1:7070: connect: connection refused")

// fakeRegistry is an in-memory registry with leases, as the contract
// describes (R2–R4), plus switches for the ways a real one misbehaves:
// forgetting everything, being down, refusing the key, being slow.
type fakeRegistry struct {
	mu      sync.Mutex
	leases  map[string]lease
	down    error // every call fails with it
	denied  bool  // every call answers 401
	latency map[string]time.Duration

	calls     map[string]int            // op → calls
	byID      map[string]map[string]int // id → op → calls
	landed    map[string]map[string]int // id → op → successful calls
	cancelled int                       // calls that ended because ctx did
	inflight  int
	peak      int
}

type lease struct {
	in      registryclient.Instance
	expires time.Time
}

func newFake() *fakeRegistry {
	return &fakeRegistry{
		leases:  map[string]lease{},
		latency: map[string]time.Duration{},
		calls:   map[string]int{},
		byID:    map[string]map[string]int{},
		landed:  map[string]map[string]int{},
	}
}

// enter counts a call and waits out the latency like a slow server would,
// giving up when ctx does.
func (f *fakeRegistry) enter(ctx context.Context, op, id string) error {
	f.mu.Lock()
	f.calls[op]++
	if f.byID[id] == nil {
		f.byID[id] = map[string]int{}
	}
	f.byID[id][op]++
	f.inflight++
	f.peak = max(f.peak, f.inflight)
	d := f.latency[op]
	f.mu.Unlock()

	var err error
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			err = ctx.Err()
		}
	}
	f.mu.Lock()
	f.inflight--
	if err == nil {
		err = ctx.Err()
	}
	switch {
	case err != nil:
		f.cancelled++
	case f.down != nil:
		err = f.down
	case f.denied:
		err = fmt.Errorf("register: 401: %w", registryclient.ErrUnauthorized)
	}
	if err != nil {
		f.mu.Unlock()
	}
	return err // on nil, f.mu stays held for the caller
}

func (f *fakeRegistry) land(op, id string) {
	if f.landed[id] == nil {
		f.landed[id] = map[string]int{}
	}
	f.landed[id][op]++
}

func (f *fakeRegistry) Register(ctx context.Context, in registryclient.Instance) (string, bool, error) {
	if err := f.enter(ctx, "register", in.ID); err != nil {
		return "", false, err
	}
	defer f.mu.Unlock()
	if in.Name == "" || in.Address == "" || in.Port == 0 {
		return "", false, fmt.Errorf("register: 400: %w", registryclient.ErrBadRequest)
	}
	_, existed := f.live(in.ID)
	f.leases[in.ID] = lease{in: in, expires: time.Now().Add(fakeTTL(in))}
	f.land("register", in.ID)
	return in.ID, !existed, nil
}

func (f *fakeRegistry) Heartbeat(ctx context.Context, id string) error {
	if err := f.enter(ctx, "heartbeat", id); err != nil {
		return err
	}
	defer f.mu.Unlock()
	l, ok := f.live(id)
	if !ok {
		return fmt.Errorf("heartbeat %s: 410: %w", id, registryclient.ErrGone)
	}
	l.expires = time.Now().Add(fakeTTL(l.in))
	f.leases[id] = l
	f.land("heartbeat", id)
	return nil
}

func (f *fakeRegistry) Deregister(ctx context.Context, id string) error {
	if err := f.enter(ctx, "deregister", id); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.live(id); !ok {
		return fmt.Errorf("deregister %s: 404: %w", id, registryclient.ErrNotFound)
	}
	delete(f.leases, id)
	f.land("deregister", id)
	return nil
}

// fakeTTL is the lease the registry grants: the instance's, or its 90 s
// default.
func fakeTTL(in registryclient.Instance) time.Duration {
	if in.TTL <= 0 {
		return 90 * time.Second
	}
	return time.Duration(in.TTL)
}

// live returns id's lease unless it expired, reaping it like the
// registry's reaper would have. Called with f.mu held.
func (f *fakeRegistry) live(id string) (lease, bool) {
	l, ok := f.leases[id]
	if ok && time.Now().After(l.expires) {
		delete(f.leases, id)
		ok = false
	}
	return l, ok
}

// wipe forgets every instance, as a registry restarted without state.
func (f *fakeRegistry) wipe() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.leases)
}

func (f *fakeRegistry) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

func (f *fakeRegistry) setDenied(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.denied = v
}

func (f *fakeRegistry) setLatency(op string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency[op] = d
}

// holds returns the live instances by id.
func (f *fakeRegistry) holds() map[string]registryclient.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]registryclient.Instance{}
	for id := range f.leases {
		if l, ok := f.live(id); ok {
			out[id] = l.in
		}
	}
	return out
}

func (f *fakeRegistry) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeRegistry) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeRegistry) countID(id, op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byID[id][op]
}

func (f *fakeRegistry) landedID(id, op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.landed[id][op]
}

func (f *fakeRegistry) concurrency() (now, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight, f.peak
}

func (f *fakeRegistry) cancels() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}
