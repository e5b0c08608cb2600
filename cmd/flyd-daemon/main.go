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

func main() {
	restoreTerm()
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// restoreTerm puts back the TERM of the caller, which `flyd` hides from
// this program's initialisation (see termHidden in cmd/flyd): TERM is the
// terminal's again for flyd top, the daemon and what they start.
func restoreTerm() {
	term, ok := os.LookupEnv("FLYD_TERM")
	if !ok {
		return
	}
	os.Unsetenv("FLYD_TERM")
	if term == "" {
		os.Unsetenv("TERM")
	} else {
		os.Setenv("TERM", term)
	}
}
