// Package par runs the steps of a loop whose steps are independent on a
// few goroutines at once: where each step waits on the kernel or on a
// runtime (a file read, a process looked up, an RPC), a restart over
// thousands of them takes a fraction of a step-by-step loop's time.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each calls f(i) for every i in [0, n), on at most workers goroutines
// (GOMAXPROCS when workers < 1), and returns once every call has. The
// calls run in no set order; f must be safe to call concurrently and
// should write only what belongs to its i.
func Each(n, workers int, f func(i int)) {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
