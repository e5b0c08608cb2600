package registrar

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// The real client is what the daemon plugs in.
var _ Registry = (*registryclient.Client)(nil)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want class
	}{
		{nil, classOK},
		{fmt.Errorf("heartbeat: %w", registryclient.ErrGone), classGone},
		{fmt.Errorf("deregister: %w", registryclient.ErrNotFound), classGone},
		{fmt.Errorf("x: %w", registryclient.ErrUnauthorized), classRefused},
		{fmt.Errorf("x: %w", registryclient.ErrBadRequest), classInvalid},
		{fmt.Errorf("register: %w", registryclient.ErrConflict), classInvalid},
		{errRefused, classDown},
		{fmt.Errorf("heartbeat: 503 Service Unavailable"), classDown},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), classDown},
		{fmt.Errorf("post: %w", context.Canceled), classAborted},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		c      class
		n      int
		lo, hi time.Duration
	}{
		{classDown, 1, 250 * time.Millisecond, 500 * time.Millisecond},
		{classDown, 2, 500 * time.Millisecond, time.Second},
		{classDown, 7, 15 * time.Second, 30 * time.Second},
		{classDown, 1000, 15 * time.Second, 30 * time.Second},
		{classRefused, 1, 2500 * time.Millisecond, 5 * time.Second},
		{classRefused, 100, 150 * time.Second, 5 * time.Minute},
		{classInvalid, 1, 2500 * time.Millisecond, 5 * time.Second},
	} {
		for range 100 {
			if d := backoff(tc.c, tc.n); d < tc.lo || d > tc.hi {
				t.Fatalf("backoff(%v, %d) = %v, want %v..%v", tc.c, tc.n, d, tc.lo, tc.hi)
			}
		}
	}
}

func TestPeriod(t *testing.T) {
	for _, tc := range []struct {
		lease  time.Duration
		lo, hi time.Duration
	}{
		{30 * time.Second, 9 * time.Second, 11 * time.Second},
		{300 * time.Millisecond, 90 * time.Millisecond, 110 * time.Millisecond},
		{time.Nanosecond, 45 * time.Millisecond, 55 * time.Millisecond},
	} {
		for range 100 {
			if d := period(tc.lease); d < tc.lo || d > tc.hi {
				t.Fatalf("period(%v) = %v, want %v..%v", tc.lease, d, tc.lo, tc.hi)
			}
		}
	}
}

func TestLeaseOf(t *testing.T) {
	for _, tc := range []struct {
		ttl  int64
		want time.Duration
	}{{0, 30 * time.Second}, {-1, 30 * time.Second}, {int64(time.Second), time.Second}} {
		if got := leaseOf(&registryclient.Instance{TTL: tc.ttl}); got != tc.want {
			t.Errorf("leaseOf(%d) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestDue(t *testing.T) {
	now := time.Now()
	fresh := entry{desired: true, registered: true, gen: 2, regGen: 2, renewedAt: now, lease: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*entry)
		want op
	}{
		{"up to date", func(*entry) {}, opHeartbeat},
		{"never registered", func(e *entry) { e.registered = false }, opRegister},
		{"content changed", func(e *entry) { e.gen = 3 }, opRegister},
		{"lease lapsed", func(e *entry) { e.renewedAt = now.Add(-2 * time.Second) }, opRegister},
		{"undesired, held", func(e *entry) { e.desired, e.held = false, true }, opDeregister},
		{"undesired, not held", func(e *entry) { e.desired = false }, opNone},
	} {
		e := fresh
		tc.edit(&e)
		if got := e.due(now); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
}
