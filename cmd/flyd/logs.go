package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flyd-dev/flyd/api"
)

func init() {
	register("logs", command{"print a workload's logs", "[-f] [--tail N] NAME", cmdLogs})
	register("events", command{"stream the daemon's events, across daemon restarts", "[--reconnect D]", cmdEvents})
	register("version", command{"print the version", "", cmdVersion})
}

func cmdLogs(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	follow := fs.Bool("f", false, "follow the log as it grows")
	fs.BoolVar(follow, "follow", false, "same as -f")
	tail := fs.Int("tail", -1, "print only the last N lines (default all)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one workload name is needed")
	}
	err = c.client.Logs(ctx, pos[0], c.stdout, *tail, *follow)
	if *follow && ctx.Err() == nil && (err == nil || errors.Is(err, io.ErrUnexpectedEOF)) {
		// Only a daemon going away ends a follow: say so, and not as success.
		return errors.New("the daemon went away; the log was followed up to here (follow it again once the daemon is back)")
	}
	return err
}

func cmdEvents(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	patience := fs.Duration("reconnect", 30*time.Second, "how long to wait for a daemon that went away (a restart) before giving up; 0 gives up at once")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	ch, err := c.client.Events(ctx)
	if err != nil {
		return err
	}
	for {
		for ev := range ch {
			if c.json {
				if err := printJSONLine(c.stdout, ev); err != nil {
					return err
				}
				continue
			}
			printEvent(c.stdout, ev)
		}
		if ctx.Err() != nil {
			return nil
		}
		if ch, err = reconnect(ctx, c, *patience); err != nil {
			return err
		}
	}
}

// reconnect opens a stream again after the daemon ended it, as a daemon
// restart does, trying for up to patience. What happened while no daemon
// answered is not replayed: reconnect says so on stderr.
func reconnect(ctx context.Context, c *cli, patience time.Duration) (<-chan api.Event, error) {
	if patience <= 0 {
		return nil, errors.New("the daemon ended the stream")
	}
	fmt.Fprintf(c.stderr, "flyd %s: the daemon went away; waiting up to %s for it\n", c.name, patience)
	deadline := time.Now().Add(patience)
	for {
		s, err := c.client.Events(ctx)
		if err == nil {
			fmt.Fprintf(c.stderr, "flyd %s: reconnected; what happened while no daemon answered is not repeated\n", c.name)
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

func cmdVersion(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if c.json {
		return printJSONLine(c.stdout, map[string]string{"version": version})
	}
	fmt.Fprintf(c.stdout, "flyd %s\n", version)
	return nil
}

func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
