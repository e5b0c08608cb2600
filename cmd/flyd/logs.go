package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

func init() {
	register("logs", command{"print a workload's logs", "[-f] [--tail N] NAME", cmdLogs})
	register("events", command{"stream the daemon's events", "", cmdEvents})
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
	return c.client.Logs(ctx, pos[0], c.stdout, *tail, *follow)
}

func cmdEvents(ctx context.Context, c *cli, args []string) error {
	if _, err := c.parse(c.flags(), args); err != nil {
		return err
	}
	ch, err := c.client.Events(ctx)
	if err != nil {
		return err
	}
	for ev := range ch {
		if c.json {
			if err := printJSONLine(c.stdout, ev); err != nil {
				return err
			}
			continue
		}
		printEvent(c.stdout, ev)
	}
	return nil
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
