package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

func init() {
	cli.Register("logs", "print workloads' logs", "[-f] [--tail N] [--since D] [-t] [--raw] NAME... | --all | -p PROJECT", cmdLogs)
	cli.Register("events", "stream the daemon's events, across daemon restarts", "[--reconnect D]", cmdEvents)
	cli.RegisterQuery("version", "print the version", "", cmdVersion)
}

func cmdLogs(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	follow := fs.Bool("f", false, "follow the logs as they grow, across daemon restarts")
	fs.BoolVar(follow, "follow", false, "same as -f")
	tail := fs.Int("tail", -1, "print only the last N lines of each; -1 prints all")
	since := fs.String("since", "", "only lines written since this long ago (10m) or this time (RFC 3339)")
	stamps := fs.Bool("timestamps", false, "begin every line with when it was written (UTC)")
	fs.BoolVar(stamps, "t", false, "same as --timestamps")
	patience := fs.Duration("reconnect", 30*time.Second, "with -f, how long to wait for a daemon that went away (a restart); 0 gives up at once")
	all := fs.Bool("all", false, "every workload of the project (-p; the default project without it)")
	raw := fs.Bool("raw", false, "write the logs' bytes as they are on a terminal too, escape sequences and all (a terminal is otherwise shown them escaped, \\x1b)")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	// A project named without workloads is all of it, as compose's logs.
	*all = *all || len(pos) == 0 && c.Project != ""
	q := api.LogQuery{Tail: *tail, Follow: *follow}
	if *since != "" {
		if q.Since, err = parseSince(*since, time.Now()); err != nil {
			return cli.Usagef("--since: %v", err)
		}
	}
	names := make([]string, len(pos))
	for i, n := range pos {
		names[i] = c.FullName(n)
	}
	if len(names) > 0 {
		// A group's logs are its replicas' (a daemon not there yet, for
		// -f to wait for, knows none).
		if ws, err := c.Client.List(ctx); err == nil {
			names = groupMembers(ws, names)
		}
	}
	if *all {
		if len(pos) > 0 {
			return cli.Usagef("names or --all, not both")
		}
		if names, err = projectNames(ctx, c); err != nil {
			return err
		}
	}
	switch {
	case len(names) == 0 && !*all:
		return cli.Usagef("a workload name, --all or -p PROJECT is needed")
	case len(names) == 0:
		return nil
	}
	return printLogs(ctx, c, names, q, logOptions{named: len(names) > 1 || *all, stamps: *stamps, raw: *raw, patience: *patience})
}

// logOptions say how printLogs prints.
type logOptions struct {
	named, stamps, raw bool
	patience           time.Duration
}

// printLogs prints the logs of names as q selects them, merged in the
// order their lines were written, each behind its workload's name when
// named.
func printLogs(ctx context.Context, c *cli.Env, names []string, q api.LogQuery, o logOptions) error {
	p := newLogPrinter(c.Stdout, names, o.named, o.stamps)
	// What a workload wrote does not drive the reader's terminal: on one,
	// control characters are shown escaped; elsewhere (a file, a pipe)
	// the bytes are the log's.
	f, ok := c.Stdout.(*os.File)
	p.escape = ok && cli.IsTerminal(f) && !o.raw
	return mergeLogs(ctx, len(names), p, func(ctx context.Context, i int, out func(logItem) error) error {
		return streamLog(c, ctx, names[i], q, o.patience, func(kind itemKind, r api.LogRecord) error {
			return out(logItem{src: i, kind: kind, rec: r})
		})
	})
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a negative duration")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (10m, 2h) nor a time (2026-12-01T10:00:00Z)", s)
}

// streamLog reads one workload's log and, following, goes on across a
// daemon restart: it waits up to patience for the daemon and resumes at
// the position after the last record it had, so no line is lost or
// repeated. A gap it cannot fill (rotated away meanwhile, or a log
// that started over) is said on stderr.
func streamLog(c *cli.Env, ctx context.Context, name string, q api.LogQuery, patience time.Duration, out func(itemKind, api.LogRecord) error) error {
	var next *int64
	var deadline time.Time
	for {
		connected := false
		err := c.Client.Logs(ctx, name, q, api.LogFunc(func(r api.LogRecord) error {
			if !connected {
				connected = true
				if !deadline.IsZero() {
					fmt.Fprintf(c.Stderr, "flyd logs: %s: reconnected\n", name)
					deadline = time.Time{}
				}
				if next != nil && r.Pos != *next {
					logGap(c, name, *next, r.Pos)
				}
			}
			end := r.End()
			next = &end
			if len(r.Data) == 0 {
				return out(caughtUp, r)
			}
			return out(record, r)
		}))
		var answered *api.Error
		switch {
		case ctx.Err() != nil:
			return nil
		case !q.Follow, errors.As(err, &answered):
			if err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
			return err
		case patience <= 0:
			return fmt.Errorf("%s: the daemon went away; the log was followed up to here", name)
		case deadline.IsZero():
			fmt.Fprintf(c.Stderr, "flyd logs: %s: the daemon went away; waiting up to %s for it\n", name, patience)
			deadline = time.Now().Add(patience)
			if err := out(reconnecting, api.LogRecord{}); err != nil {
				return err
			}
		case time.Now().After(deadline):
			return fmt.Errorf("%s: the daemon did not come back within %s: %w", name, patience, err)
		}
		if next != nil {
			q.From = next
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func logGap(c *cli.Env, name string, want, got int64) {
	if got > want {
		fmt.Fprintf(c.Stderr, "flyd logs: %s: %d bytes were rotated away before they could be read\n", name, got-want)
		return
	}
	fmt.Fprintf(c.Stderr, "flyd logs: %s: the log started over (the workload was replaced)\n", name)
}

func cmdEvents(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	patience := fs.Duration("reconnect", 30*time.Second, "how long to wait for a daemon that went away (a restart) before giving up; 0 gives up at once")
	if _, err := c.Parse(fs, args); err != nil {
		return err
	}
	// From the daemon's last event on, known before any event comes: a
	// daemon that goes away before the next one is resumed from there,
	// and what the next daemon did meanwhile (adopting, restarting) is
	// replayed rather than lost.
	st, err := c.Client.Status(ctx)
	if err != nil {
		return err
	}
	last := st.LastEvent
	ch, err := c.Client.Events(ctx, last)
	if err != nil {
		return err
	}
	for {
		for ev := range ch {
			if last > 0 && ev.Seq > last+1 {
				fmt.Fprintf(c.Stderr, "flyd events: %d events were lost: the daemon keeps no more\n", ev.Seq-last-1)
			}
			last = max(last, ev.Seq)
			if c.Project != "" && ev.Project != c.Project {
				continue
			}
			if c.JSON {
				if err := printJSONLine(c.Stdout, ev); err != nil {
					return err
				}
				continue
			}
			printEvent(c.Stdout, ev)
		}
		if ctx.Err() != nil {
			return nil
		}
		if ch, err = reconnect(ctx, c, *patience, last); err != nil {
			return err
		}
	}
}

// reconnect opens the event stream again after the daemon ended it, as a
// daemon restart does, trying for up to patience, and resumes after the
// last event it had: the next daemon replays what was missed.
func reconnect(ctx context.Context, c *cli.Env, patience time.Duration, last uint64) (<-chan api.Event, error) {
	if patience <= 0 {
		return nil, errors.New("the daemon ended the stream")
	}
	fmt.Fprintf(c.Stderr, "flyd %s: the daemon went away; waiting up to %s for it\n", c.Name, patience)
	deadline := time.Now().Add(patience)
	for {
		s, err := c.Client.Events(ctx, last)
		if err == nil {
			fmt.Fprintf(c.Stderr, "flyd %s: reconnected\n", c.Name)
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon did not come back within %s: %w", patience, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func cmdVersion(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	if _, err := c.Parse(fs, args); err != nil {
		return err
	}
	if c.JSON {
		return printJSONLine(c.Stdout, map[string]string{"version": cli.Version})
	}
	fmt.Fprintf(c.Stdout, "flyd %s\n", cli.Version)
	return nil
}

func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
