package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/cli"
)

// settle is how long a workload without a health check must have run to
// count as up: a program that dies at once must not pass for started.
const settle = time.Second

// waitFlags adds --wait and --timeout to a command that starts workloads.
func waitFlags(fs *flag.FlagSet) (wait *bool, timeout *time.Duration) {
	return fs.Bool("wait", false, "return once every workload is up (running and healthy, or completed), or has failed"),
		fs.Duration("timeout", time.Minute, "with --wait, how long to wait")
}

// waitUp waits until every workload named is up, or one cannot be: a
// workload is up once it runs and passed its health check (or, without
// one, has run for a second), or exited 0; it failed when it is failed,
// exited with an error, or stopped. The error names those that failed or
// were not up in time.
func waitUp(c *cli.Env, ctx context.Context, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ws, err := c.Client.List(ctx)
		if err != nil {
			return err
		}
		by := make(map[string]api.Workload, len(ws))
		for _, w := range ws {
			by[w.Name] = w
		}
		var failed, pending []string
		for _, n := range names {
			w, ok := by[n]
			switch up, why := isUp(w, ok); {
			case why != "":
				failed = append(failed, n+" ("+why+")")
			case !up:
				pending = append(pending, n)
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("not up: %s", strings.Join(failed, ", "))
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(pending)
			return fmt.Errorf("not up after %s: %s", timeout, strings.Join(pending, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isUp judges one workload: up, not yet, or never (why says why).
func isUp(w api.Workload, exists bool) (up bool, why string) {
	switch {
	case !exists:
		return false, "removed"
	case w.State == api.StateFailed:
		return false, "failed: " + w.LastError
	case w.State == api.StateStopped:
		return false, "stopped"
	case w.State == api.StateExited && w.LastExit != nil && w.LastExit.Code == 0 && w.LastExit.Signal == "" && !w.LastExit.Unknown:
		return true, ""
	case w.State == api.StateExited:
		return false, "exited: " + w.Reason
	case w.State != api.StateRunning:
		return false, ""
	case w.Healthy != nil:
		return *w.Healthy, ""
	}
	return w.StartedAt != nil && time.Since(*w.StartedAt) >= settle, ""
}
