// Command flyd is flyd's command-line client. The daemon and the registry
// server are a program of their own, cmd/flyd-daemon, which `flyd daemon`
// and `flyd registry serve` exec; package internal/cli says why.
package main

import (
	"os"

	"github.com/flyd-dev/flyd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
