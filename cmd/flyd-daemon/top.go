package main

import (
	"context"
	"os"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/cmd/internal/top"
)

func init() {
	cli.Register("top", "a live view of the workloads, their logs and events, with keys to act on them", "", cmdTop)
}

func cmdTop(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if !cli.IsTerminal(os.Stdin) {
		return cli.Usagef("flyd top needs a terminal; for a script, read `flyd events` and `flyd ps --json`")
	}
	var project *string
	if c.Project != "" {
		project = &c.Project
	}
	return top.Run(ctx, c.Client, project, os.Stdin, c.Stdout)
}
