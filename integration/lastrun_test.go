package integration

import (
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestDaemonRestartKeepsLastRun: what `inspect` shows of the last run of a
// workload at rest (when it started, how it ended, the restarts, why it
// rests) is the same after a daemon restart, whether the daemon exited on
// SIGTERM or was killed.
func TestDaemonRestartKeepsLastRun(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			d1 := startDaemon(t)
			d1.mustCLI(t, "apply", "-f", d1.writeSpec(t, "rest.yaml", `
name: dies
command: ["@PROG@", "exit", "3"]
restart: {policy: on-failure, max_restarts: 1, backoff: {initial: 50ms}}
---
name: once
command: ["@PROG@", "exit", "4"]
restart: {policy: never}
`))
			before := map[string]*api.Workload{
				"dies": d1.waitState(t, "dies", api.StateFailed),
				"once": d1.waitState(t, "once", api.StateExited),
			}
			for n, w := range before {
				if w.StartedAt == nil || w.LastExit == nil {
					t.Fatalf("%s before the restart: started_at %v, last_exit %+v; want both", n, w.StartedAt, w.LastExit)
				}
			}
			if sig == syscall.SIGKILL {
				d1.kill(t)
			} else {
				d1.terminate(t)
			}

			d2 := startDaemon(t, inDir(d1.dir))
			for n, was := range before {
				w := d2.waitState(t, n, was.State)
				if w.StartedAt == nil || !w.StartedAt.Equal(*was.StartedAt) {
					t.Errorf("%s after the restart: started_at %v, want %s", n, w.StartedAt, was.StartedAt)
				}
				if w.LastExit == nil || w.LastExit.Code != was.LastExit.Code || !w.LastExit.At.Equal(was.LastExit.At) ||
					w.LastExit.Description != was.LastExit.Description {
					t.Errorf("%s after the restart: last_exit %+v, want %+v", n, w.LastExit, was.LastExit)
				}
				if w.Restarts != was.Restarts || w.LastError != was.LastError || w.Reason != was.Reason {
					t.Errorf("%s after the restart: restarts %d, last_error %q, reason %q; want %d, %q, %q",
						n, w.Restarts, w.LastError, w.Reason, was.Restarts, was.LastError, was.Reason)
				}
			}
		})
	}
}
