// Command flyd-daemon is flyd's daemon and its registry server: what
// `flyd daemon` and `flyd registry serve` exec. It links what the client
// does not need (the runtimes' clients, the metrics, etcd's client).
package main

import (
	"os"

	"github.com/flyd-dev/flyd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
