package supervisor

import (
	"runtime/debug"
	"sync"
	"time"
)

// A batch of many workloads (an apply of a directory, a project's up, a
// stop or removal of all) leaves behind what its work allocated: decoded
// requests, encoded records, the starts' and stops' buffers. Go's
// collector frees it at its next cycle, which at rest is the one it forces
// every two minutes, and returns the pages to the kernel only slowly
// after that: a daemon that had just started 2,000 workloads held a third
// more memory than it needs, and a sixth more two and a half minutes
// later (BENCHMARKS.md, round seven). Once batches have stopped
// for settleQuiet, the memory is collected and returned at once: one
// collection for a burst of batches, and none for small ones.
const (
	settleMin   = 64
	settleQuiet = 200 * time.Millisecond
)

// settler runs the collection a quiet while after the last large batch.
type settler struct {
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
	// collect is the collection (debug.FreeOSMemory; a test's counter).
	collect func()
}

// after notes a batch of n workloads.
func (st *settler) after(n int) {
	if n < settleMin {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.closed:
	case st.timer == nil:
		collect := st.collect
		if collect == nil {
			collect = debug.FreeOSMemory
		}
		st.timer = time.AfterFunc(settleQuiet, collect)
	default:
		// Reset runs collect again even if the timer fired meanwhile:
		// this batch's garbage is new.
		st.timer.Reset(settleQuiet)
	}
}

// hold puts off a collection due while a large batch of n runs: its end
// sets it again (after).
func (st *settler) hold(n int) {
	if n < settleMin {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timer != nil {
		st.timer.Stop()
	}
}

// close cancels a collection not yet run.
func (st *settler) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.timer != nil {
		st.timer.Stop()
	}
}
