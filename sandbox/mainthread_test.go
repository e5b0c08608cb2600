package sandbox

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// neverOnMainThread runs enter 4×rounds times from 4 goroutines, each
// entering with a function that sleeps (a locked thread that sleeps gives
// its P away, so the runtime keeps picking threads, the main one among
// them), while it samples what the rest of the system sees of the main
// thread; foreign reports a sample that shows the main thread lent out.
func neverOnMainThread(t *testing.T, what string, rounds int, enter func(func() error) error, foreign func() bool) {
	t.Helper()
	stop := make(chan struct{})
	var bad, samples atomic.Int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if foreign() {
				bad.Add(1)
			}
			samples.Add(1)
		}
	})
	sleep := func() error { time.Sleep(100 * time.Microsecond); return nil }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range rounds {
				if err := enter(sleep); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if bad.Load() != 0 {
		t.Fatalf("the main thread was seen in %s in %d of %d samples", what, bad.Load(), samples.Load())
	}
}
