package main

import (
	"context"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

func init() {
	cli.Register("registry", "run or query a service registry",
		"serve [flags] (flyd registry serve -h lists them)\n"+
			"       flyd registry ls [-w] [--registry URL] [--registry-key-file F] [--registry-ca F] [--healthy-only] [--json] [--socket S]\n"+
			"       flyd registry drift --reference FILE [--registry URL] [--registry-key-file F] [--registry-ca F] [--json] [--socket S]",
		cmdRegistry)
}

// cmdRegistry execs the daemon program for every registry command: the
// registry's client (TLS, its TOML references) is linked there, so that
// no other command starts with it.
func cmdRegistry(_ context.Context, _ *cli.Env, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("name a subcommand: serve, ls or drift")
	}
	return execDaemon("registry", args...)
}
