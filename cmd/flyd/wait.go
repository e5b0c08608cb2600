package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

// waitFlags adds --wait and --timeout to a command that starts workloads.
func waitFlags(fs *flag.FlagSet) (wait *bool, timeout *time.Duration) {
	return fs.Bool("wait", false, "return once every workload is up (running and healthy, or completed), or has failed"),
		fs.Duration("timeout", time.Minute, "with --wait, how long to wait")
}

// failingLogLines is how much of a workload's log a failed --wait shows:
// what a CI run needs to see why, without scrolling past a whole log.
const failingLogLines = 10

// waitUp waits until every workload named is up, or one cannot be: a
// workload is up once it runs and passed its health check (or, without
// one, has run for a second), or exited 0; it failed when it is failed,
// exited with an error, or stopped. Once all are up it says what each
// is; otherwise the error names those that failed or were not up in
// time, and the end of each one's log goes to stderr.
func waitUp(c *cli.Env, ctx context.Context, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	// One project's names: its workloads alone are listed each poll.
	list := c.Client.List
	if project, ok := oneProject(names); ok {
		list = func(ctx context.Context) ([]api.Workload, error) { return c.Client.ListProject(ctx, project) }
	}
	// Every change the daemon makes is an event: each wakes the wait to
	// look again, at once. Subscribed before the first look, so none is
	// missed between the two.
	changed := watchChanges(ctx, c, names)
	for {
		ws, err := list(ctx)
		if err != nil {
			return err
		}
		by := make(map[string]api.Workload, len(ws))
		for _, w := range ws {
			by[w.Name] = w
		}
		var failed, pending, why []string
		members := groupMembers(ws, names)
		for _, n := range members {
			w, ok := by[n]
			switch up, reason := isUp(w, ok); {
			case reason != "":
				failed, why = append(failed, n), append(why, n+" ("+reason+")")
			case !up:
				pending = append(pending, n)
			}
		}
		if len(failed) > 0 {
			showLogs(c, ctx, failed, by)
			return fmt.Errorf("not up: %s", strings.Join(why, ", "))
		}
		if len(pending) == 0 {
			if !c.JSON {
				for _, n := range members {
					fmt.Fprintf(c.Stdout, "%s up: %s\n", n, upState(by[n]))
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(pending)
			showLogs(c, ctx, pending, by)
			return fmt.Errorf("not up after %s: %s", timeout, strings.Join(pending, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed.wake:
		case <-time.After(changed.next(pending, by, deadline)):
		}
	}
}

// changes wakes a wait when the daemon says something changed.
type changes struct {
	wake chan struct{}
	live atomic.Bool // the event stream is up: polling is only a safety net
}

// watchChanges subscribes to the daemon's events, each a wake-up; while
// the stream is down (an old daemon, a restart) the wait polls instead.
func watchChanges(ctx context.Context, c *cli.Env, names []string) *changes {
	ch := &changes{wake: make(chan struct{}, 1)}
	// One project's names: its events alone wake the wait, not those of
	// the other projects coming up beside it.
	events := func() (<-chan api.Event, error) { return c.Client.Events(ctx, 0) }
	if p, ok := oneProject(names); ok {
		events = func() (<-chan api.Event, error) { return c.Client.ProjectEvents(ctx, 0, p) }
	}
	evs, err := events()
	if err != nil {
		return ch
	}
	ch.live.Store(true)
	go func() {
		defer ch.live.Store(false)
		for range evs {
			select {
			case ch.wake <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}()
	return ch
}

// next is how long to wait without an event: until the first pending
// workload without a health check has run for api.Settle, the one
// change no event announces; at most a second (or the deadline), or a
// tenth of one while there are no events to wake the wait.
func (ch *changes) next(pending []string, by map[string]api.Workload, deadline time.Time) time.Duration {
	if !ch.live.Load() {
		return 100 * time.Millisecond
	}
	now := time.Now()
	d := min(time.Second, max(0, deadline.Sub(now))+time.Millisecond)
	for _, n := range pending {
		if w := by[n]; w.State == api.StateRunning && w.Healthy == nil && w.StartedAt != nil {
			d = min(d, max(time.Millisecond, w.StartedAt.Add(api.Settle).Sub(now)))
		}
	}
	return d
}

// upState says what an up workload is: running (and healthy, when it
// has a check), or done.
func upState(w api.Workload) string {
	switch {
	case w.State == api.StateExited:
		return "exited 0"
	case w.State == api.StateScheduled && w.NextStart != nil:
		return "scheduled, next run at " + when(*w.NextStart)
	case w.Healthy != nil:
		return fmt.Sprintf("running, healthy, pid %d", w.PID)
	case w.State == api.StateStopped && w.Up:
		return "disabled (flyd start " + w.Name + " starts it)"
	case w.PID == 0:
		return "in force (" + string(w.Kind) + ": it runs nothing)"
	}
	return fmt.Sprintf("running, pid %d", w.PID)
}

// showLogs writes the end of each named workload's log to stderr, behind
// a line that names it.
func showLogs(c *cli.Env, ctx context.Context, names []string, by map[string]api.Workload) {
	for _, n := range names {
		if _, ok := by[n]; !ok {
			continue // removed: no log left
		}
		var b bytes.Buffer
		err := c.Client.Logs(ctx, n, api.LogQuery{Tail: failingLogLines}, api.WriteLog(&b))
		switch {
		case err != nil:
			fmt.Fprintf(c.Stderr, "flyd %s: %s: its log cannot be read: %v\n", c.Name, n, err)
		case b.Len() == 0:
			fmt.Fprintf(c.Stderr, "flyd %s: %s: its log is empty\n", c.Name, n)
		default:
			fmt.Fprintf(c.Stderr, "flyd %s: %s: the last lines of its log:\n", c.Name, n)
			if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
				b.WriteByte('\n')
			}
			_, _ = c.Stderr.Write(b.Bytes())
		}
	}
}

// isUp is the daemon's judgement of one workload: up, not yet, or never
// (why says why).
func isUp(w api.Workload, exists bool) (up bool, why string) {
	if !exists {
		return false, "removed"
	}
	return w.Up, w.NotUp
}

// groupMembers is names with each group's name (one no workload has)
// replaced by its replicas' names, as ws lists them.
func groupMembers(ws []api.Workload, names []string) []string {
	have, groups := make(map[string]bool, len(ws)), map[string][]string{}
	for _, w := range ws {
		have[w.Name] = true
		if w.Group != "" {
			groups[w.Group] = append(groups[w.Group], w.Name)
		}
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !have[n] && len(groups[n]) > 0 {
			out = append(out, groups[n]...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// oneProject is the project of names when they are all of one.
func oneProject(names []string) (string, bool) {
	if len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return spec.ProjectOf(n) != spec.ProjectOf(names[0]) }) {
		return "", false
	}
	return spec.ProjectOf(names[0]), true
}
