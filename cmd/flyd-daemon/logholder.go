package main

import (
	"context"
	"errors"
	"flag"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/logpipe/holder"
)

func init() {
	cli.Register("log-holder", "keep the read ends of the workloads' log pipes while no daemon runs (the daemon starts it)", "--socket PATH", cmdLogHolder)
}

func cmdLogHolder(ctx context.Context, c *cli.Env, args []string) error {
	fs := flag.NewFlagSet("log-holder", flag.ContinueOnError)
	fs.SetOutput(c.Stderr)
	socket := fs.String("socket", "", "the socket to serve, in the daemon's run dir")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if *socket == "" || fs.NArg() > 0 {
		return cli.Usagef("log-holder takes --socket PATH and nothing else")
	}
	return holder.Serve(ctx, *socket)
}
