// Command flyd-log-holder keeps the read ends of the workloads' log pipes
// while no daemon runs: the daemon starts it beside itself, in a session
// of its own, and it leaves once idle (package logpipe/holder). It is a
// program of its own so that a process that lives as long as the
// workloads links nothing but the holder: `flyd-daemon log-holder` does
// the same with all of the daemon's packages initialised (6.6 MiB of
// anonymous memory against 1 MiB here).
//
//	flyd-log-holder --socket PATH
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flyd-dev/flyd/logpipe/holder"
)

func main() {
	fs := flag.NewFlagSet("flyd-log-holder", flag.ContinueOnError)
	socket := fs.String("socket", "", "the socket to serve, in the daemon's run dir")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *socket == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "flyd-log-holder: takes --socket PATH and nothing else")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := holder.Serve(ctx, *socket); err != nil {
		fmt.Fprintln(os.Stderr, "flyd-log-holder:", err)
		os.Exit(1)
	}
}
