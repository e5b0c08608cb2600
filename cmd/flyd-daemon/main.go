// Command flyd-daemon is flyd's daemon, its registry server and client and
// its terminal UI: what `flyd daemon`, `flyd registry` and `flyd top`
// exec. It links what the other commands do not need (the runtimes'
// clients, the metrics, etcd's client, the registry's client with TLS, the
// terminal UI's libraries).
package main

import (
	"os"
	"runtime"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

// The main goroutine stays on the main thread until the daemon has
// decided whether to exec itself again (native.StartWithLoginFiles): the
// parent-death signal a supervisor of the daemon set (prctl
// PR_SET_PDEATHSIG) belongs to that thread, and an exec from another
// thread would lose it.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) < 2 || os.Args[1] != "daemon" {
		runtime.UnlockOSThread()
	}
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
