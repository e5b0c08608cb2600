package main

import (
	"context"
	"os"

	"github.com/flyd-dev/flyd/internal/top"
)

func init() {
	register("top", command{"a live view of the workloads, their logs and events, with keys to act on them", "", cmdTop})
}

func cmdTop(ctx context.Context, c *cli, args []string) error {
	pos, err := c.parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if !isTerminal(os.Stdin) {
		return usagef("flyd top needs a terminal; for a script, read `flyd events` and `flyd ps --json`")
	}
	return top.Run(ctx, c.client, os.Stdin, c.stdout)
}
