package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

// showProgress prints, on a terminal, what the workloads being applied
// are preparing (a Nix environment, an image) until stop is called: such
// work can take long, and a silent CLI looks hung.
func showProgress(c *cli.Env, ctx context.Context, names []string) (stop func()) {
	f, ok := c.Stderr.(*os.File)
	if !ok || !cli.IsTerminal(f) {
		return func() {}
	}
	ours := make(map[string]bool, len(names))
	for _, n := range names {
		ours[n] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ws, err := c.Client.List(ctx)
			if err != nil {
				continue
			}
			for _, w := range ws {
				if ours[w.Name] && w.State == api.StatePreparing {
					printProgress(f, w.Name, w.Reason, time.Since(start))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func printProgress(w io.Writer, name, what string, d time.Duration) {
	fmt.Fprintf(w, "%s: preparing (%s) %s\n", name, what, d.Round(time.Second))
}
