// Command flyd is flyd's command-line client. The daemon, the registry
// server and flyd top are a program of their own, cmd/flyd-daemon, which
// those commands exec; package cmd/internal/cli says why.
package main

import (
	"os"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
