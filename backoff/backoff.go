// Package backoff is the arithmetic of retries that back off: the wait
// before the n-th retry of a run of failures (doubled from an initial
// wait, capped, with jitter) and the count of the failures that fall
// inside a sliding window. Whether and when to retry is its caller's
// decision (the supervisor's restart policy, its adoptions and sweeps).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is how waits grow: Initial before the first retry, doubled for
// each next one, never more than Max.
type Policy struct {
	Initial, Max time.Duration
}

// Delay is the wait before retry number n (1-based) of a run of failures,
// with ±20% jitter so that what failed together does not retry together.
func (p Policy) Delay(n int) time.Duration { return p.jittered(n, rand.Float64()) }

// jittered is Delay with u, a uniform random number in [0, 1), given.
func (p Policy) jittered(n int, u float64) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	if d > p.Max {
		d = p.Max
	}
	jitter := 0.8 + 0.4*u
	return time.Duration(float64(d) * jitter)
}

// Window counts failures inside a sliding window. A run that stayed up
// longer than the window has, by then, let every earlier failure fall
// out: that is how a stable run resets the count. The zero Window counts
// none.
type Window struct {
	times []time.Time
}

// Add records a failure at now and returns how many fall inside the
// window that ends at now.
func (f *Window) Add(now time.Time, window time.Duration) int {
	keep := f.times[:0]
	for _, t := range f.times {
		if now.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	f.times = append(keep, now)
	return len(f.times)
}

// Reset forgets every failure, for a count that starts anew.
func (f *Window) Reset() { f.times = f.times[:0] }
