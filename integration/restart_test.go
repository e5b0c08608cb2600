package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// TestRestartPolicies runs one workload per policy through the Go client.
func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := context.Background()
	ms := func(n int) spec.Duration { return spec.Duration{Duration: time.Duration(n) * time.Millisecond} }
	put := func(name string, code int, r spec.Restart) {
		t.Helper()
		r.Backoff.Initial = ms(50)
		_, err := d.client.Put(ctx, &spec.Workload{Name: name, Command: []string{d.prog, "exit", strconv.Itoa(code)}, Restart: r}, true)
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
	}
	runs := func(name string, code int) int {
		return strings.Count(d.logs(t, name), fmt.Sprintf("exiting with code %d\n", code))
	}

	put("gives-up", 3, spec.Restart{Policy: spec.RestartOnFailure, MaxRestarts: 2, Window: spec.Duration{Duration: time.Minute}})
	put("clean", 0, spec.Restart{Policy: spec.RestartOnFailure})
	put("never", 3, spec.Restart{Policy: spec.RestartNever})
	put("always", 0, spec.Restart{Policy: spec.RestartAlways, MaxRestarts: spec.UnlimitedRestarts, Backoff: spec.Backoff{Max: ms(100)}})

	w := d.waitState(t, "gives-up", api.StateFailed)
	if w.Restarts != 2 || !strings.Contains(w.LastError, "gave up after 2 restarts") || w.LastExit == nil || w.LastExit.Code != 3 {
		t.Errorf("gives-up: restarts %d, last_error %q, last_exit %+v; want 2 restarts, a give-up, exit code 3",
			w.Restarts, w.LastError, w.LastExit)
	}
	for name, code := range map[string]int{"clean": 0, "never": 3} {
		w := d.waitState(t, name, api.StateExited)
		if w.Restarts != 0 || w.LastExit == nil || w.LastExit.Code != code {
			t.Errorf("%s: restarts %d, last_exit %+v; want no restart, exit code %d", name, w.Restarts, w.LastExit, code)
		}
	}
	d.waitWorkload(t, "always", "restarted after clean exits", func(w *api.Workload) bool {
		return w.Restarts >= 2 && w.LastExit != nil && w.LastExit.Code == 0
	})

	// Several backoff periods later, nothing at rest has run again.
	time.Sleep(300 * time.Millisecond)
	for name, want := range map[string][2]int{"gives-up": {3, 3}, "clean": {0, 1}, "never": {3, 1}} {
		if n := runs(name, want[0]); n != want[1] {
			t.Errorf("%s ran %d times, want %d", name, n, want[1])
		}
	}
	if w := d.get(t, "gives-up"); w.State != api.StateFailed || w.Restarts != 2 {
		t.Errorf("gives-up left failed: state %s restarts %d", w.State, w.Restarts)
	}

	// failed stays so until started again; a start gives it a fresh budget.
	d.mustCLI(t, "start", "gives-up")
	eventually(t, "gives-up ran three more times", func() error {
		if n := runs("gives-up", 3); n != 6 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	d.waitState(t, "gives-up", api.StateFailed)

	// A replacing apply starts a new history: no restarts, no last exit
	// or error of the old spec's runs.
	_, err := d.client.Put(ctx, &spec.Workload{Name: "gives-up", Command: []string{d.prog, "signals"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if w := d.get(t, "gives-up"); w.State != api.StateStopped || w.Restarts != 0 || w.LastExit != nil || w.LastError != "" {
		t.Errorf("after a replacing apply: state %s, restarts %d, last_exit %+v, last_error %q; want stopped and a clean slate",
			w.State, w.Restarts, w.LastExit, w.LastError)
	}
}
