package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// TestConcurrentApply applies the same new spec many times at once, as
// parallel CI jobs sharing a daemon do: one workload, one process. The race
// it looks for is narrow, so it tries many names and stops at the first
// duplicate.
func TestConcurrentApply(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	const names, puts = 200, 64
	for i := range names {
		name := fmt.Sprintf("twin-%d", i)
		var wg sync.WaitGroup
		for range puts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := &spec.Workload{Name: name, Command: []string{d.prog, "print", "1"}}
				if _, err := d.client.Put(t.Context(), w, true); err != nil {
					t.Errorf("put %s: %v", name, err)
				}
			}()
		}
		wg.Wait()
		// One too many is the duplicate this test looks for. One too few
		// is a child just past exec whose cmdline the kernel has not set
		// yet: it shows up a moment later.
		eventually(t, fmt.Sprintf("one process per workload after applying %s %d times at once", name, puts), func() error {
			left := processesUnder(d.dir)
			if len(left) > i+1 {
				t.Fatalf("after applying %s %d times at once: %d processes for %d workloads", name, puts, len(left), i+1)
			}
			if len(left) < i+1 {
				return fmt.Errorf("%d processes for %d workloads", len(left), i+1)
			}
			return nil
		})
	}
	if ws, err := d.client.List(t.Context()); err != nil || len(ws) != names {
		t.Fatalf("list: %d workloads, %v; want %d", len(ws), err, names)
	}
}

// TestLifecycleDuringRemoval sends commands to a workload while it is being
// removed: each must get an answer, not wait forever.
func TestLifecycleDuringRemoval(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "slow.yaml", `
name: slow
command: ["@PROG@", "ignore-term"]
stop: {timeout: 2s}
`))
	d.waitLog(t, "slow", "ignoring SIGTERM")
	removed := make(chan error, 1)
	go func() { removed <- d.client.Delete(context.Background(), "slow") }()
	d.waitState(t, "slow", api.StateStopping) // the removal waits out the grace period

	// Well past the grace period: an answer after it means the command was
	// answered, a deadline means it was lost.
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor/5)
	defer cancel()
	_, err := d.client.Stop(ctx, "slow")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop during removal got no answer within %s", 4*waitFor/5)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stop during removal: %v, want not found", err)
	}
	if err := <-removed; err != nil {
		t.Errorf("remove: %v", err)
	}
}
