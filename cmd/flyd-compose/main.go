// Command flyd-compose reads compose files for flyd's client: `flyd up`,
// `run`, `down`, `apply` and `config` run its compose-documents on every
// compose file they meet. It is a program of its own because compose's
// loader (compose-go, and the JSON schema it compiles as it starts: 10 ms
// and 1.7 MB) is linked nowhere else: neither the client, whose every call
// would pay for it, nor the daemon, which runs as long as the workloads.
package main

import (
	"os"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
