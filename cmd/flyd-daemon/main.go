// Command flyd-daemon is flyd's daemon, its registry server and client and
// its terminal UI: what `flyd daemon`, `flyd registry` and `flyd top`
// exec. It links what the other commands do not need (the runtimes'
// clients, the metrics, etcd's client, the registry's client with TLS, the
// terminal UI's libraries).
package main

import (
	"os"

	"github.com/flyd-dev/flyd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
