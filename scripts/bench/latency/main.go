// Command latency measures flyd's apply-to-running latency through the API:
// it applies -n single workloads of distinct names one at a time with
// api.Client.Apply (start=true, which answers after the first start attempt)
// and prints each call's duration in milliseconds, one per line. Every
// workload it created is removed before it exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

func main() {
	socket := flag.String("socket", "", "the daemon's API socket")
	n := flag.Int("n", 100, "workloads to apply, one at a time")
	script := flag.String("script", "", "the idle script each workload runs with /bin/sh")
	prefix := flag.String("prefix", "lat", "workload name prefix")
	flag.Parse()
	if *socket == "" || *script == "" {
		fmt.Fprintln(os.Stderr, "usage: latency -socket SOCK -script IDLE.SH [-n 100]")
		os.Exit(2)
	}
	c := api.NewClient(*socket)
	ctx := context.Background()
	var names []string
	defer func() {
		for _, name := range names {
			_ = c.Remove(ctx, name, api.RemoveOptions{})
		}
	}()
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "latency: "+format+"\n", a...)
		for _, name := range names {
			_ = c.Remove(ctx, name, api.RemoveOptions{})
		}
		os.Exit(1)
	}
	for i := 0; i < *n; i++ {
		name := fmt.Sprintf("%s-%d", *prefix, i)
		doc := fmt.Sprintf("name: %s\ncommand: [\"/bin/sh\", %q]\nrestart: {policy: never}\n", name, *script)
		ws, err := spec.Parse([]byte(doc))
		if err != nil || len(ws) != 1 {
			fail("parse spec %s: %v", name, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		w, err := c.Apply(cctx, ws[0], api.ApplyOptions{Start: true})
		d := time.Since(t0)
		cancel()
		if err != nil {
			fail("apply %s: %v", name, err)
		}
		names = append(names, name)
		if w.State != api.StateRunning || w.PID == 0 {
			fail("apply %s: state %s pid %d, want running", name, w.State, w.PID)
		}
		fmt.Printf("%.3f\n", float64(d.Microseconds())/1000)
	}
}
