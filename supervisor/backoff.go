package supervisor

import "time"

// backoff is the delay before restart number n (1-based) of a run of
// failures: initial doubled each time, capped at max, with ±20% jitter so
// that workloads that failed together do not restart together.
// u is a uniform random number in [0, 1).
func backoff(initial, max time.Duration, n int, u float64) time.Duration {
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	jitter := 0.8 + 0.4*u
	return time.Duration(float64(d) * jitter)
}

// failureWindow counts restarts inside a sliding window. A run that stayed
// up longer than the window has, by then, let every earlier failure fall
// out: that is how a stable run resets the count.
type failureWindow struct {
	times []time.Time
}

// add records a failure at now and returns how many fall inside the window.
func (f *failureWindow) add(now time.Time, window time.Duration) int {
	keep := f.times[:0]
	for _, t := range f.times {
		if now.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	f.times = append(keep, now)
	return len(f.times)
}

func (f *failureWindow) reset() { f.times = f.times[:0] }
