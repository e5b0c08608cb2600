// Package cgtest gives a test cgroups of its own: a parent made for it
// and one cgroup in it, both removed when the test ends, whatever it did.
package cgtest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
)

// made numbers the parents of this process: each test has its own.
var made atomic.Int64

// New makes a parent of the test's own with the cgroup name in it, with
// limits l. A process the test puts in it must be gone before the test's
// cleanups run (register its kill after New: cleanups run last first).
func New(t testing.TB, name string, l sandbox.Limits) (*sandbox.Cgroups, *sandbox.Cgroup) {
	t.Helper()
	testenv.RequireRoot(t, "cgroups are made on the host")
	cgs, err := sandbox.NewCgroups(fmt.Sprintf("flyd-test-%d-%d", os.Getpid(), made.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := cgs.Create(name, l)
	if err != nil {
		_ = cgs.RemoveParent()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Delete(); err != nil {
			t.Error(err)
		}
		if err := cgs.RemoveParent(); err != nil {
			t.Error(err)
		}
	})
	return cgs, g
}
