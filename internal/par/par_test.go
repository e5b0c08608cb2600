package par

import (
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {7, 1}, {1000, 0}, {1000, 3}, {5, 50}} {
		seen := make([]atomic.Int32, tc.n)
		var running, most atomic.Int32
		Each(tc.n, tc.workers, func(i int) {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Fatalf("n=%d workers=%d: index %d called %d times", tc.n, tc.workers, i, got)
			}
		}
		if tc.workers > 0 && int(most.Load()) > tc.workers {
			t.Fatalf("n=%d: %d calls at once, more than %d workers", tc.n, most.Load(), tc.workers)
		}
	}
}
