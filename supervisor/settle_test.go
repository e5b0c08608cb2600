package supervisor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestLargeBatchesSettleOnce: the memory of large batches is collected
// once they have stopped for a quiet while, one collection for a burst of
// them, none for a small batch.
func TestLargeBatchesSettleOnce(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	var runs atomic.Int32
	s.settle.collect = func() { runs.Add(1) }
	ctx := context.Background()
	apply := func(n int) {
		t.Helper()
		var changes []Change
		for i := range n {
			changes = append(changes, Change{Spec: fakeSpec(fmt.Sprintf("w-%d-%d", n, i), "run"), Options: ApplyOptions{Start: true}})
		}
		if _, err := s.ApplyAll(ctx, changes); err != nil {
			t.Fatal(err)
		}
	}
	apply(settleMin - 1)
	time.Sleep(3 * settleQuiet)
	if n := runs.Load(); n != 0 {
		t.Fatalf("a batch of %d was followed by %d collections, want none", settleMin-1, n)
	}
	apply(settleMin)
	if _, err := s.Batch(ctx, ActionStop, BatchRequest{All: true, Parallel: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * settleQuiet)
	if n := runs.Load(); n != 1 {
		t.Fatalf("an apply of %d and a stop of all right after were followed by %d collections, want 1", settleMin, n)
	}
}
