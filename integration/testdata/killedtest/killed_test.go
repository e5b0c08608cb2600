// Package killedtest is a Go test that brings up a stack with flydtest
// and waits to be killed: the integration tests kill its binary, as a CI
// timeout does, and look for what it leaves.
package killedtest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/flydtest"
	"github.com/flyd-dev/flyd/spec"
)

func TestHeld(t *testing.T) {
	prog := os.Getenv("FLYD_KILLEDTEST_PROG")
	if prog == "" {
		t.Skip("run by the integration tests, which name the program to run (FLYD_KILLEDTEST_PROG)")
	}
	p := flydtest.Start(t, flydtest.Docs(
		&spec.Network{Kind: spec.KindNetwork, Name: "net"},
		&spec.Workload{Name: "db", Network: "net", Command: []string{prog, "signals"}},
	), flydtest.Grace(time.Second))
	fmt.Printf("PROJECT %s\n", p.Name)
	time.Sleep(time.Hour)
}
