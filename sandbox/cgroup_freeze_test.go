package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFreezeHoldsWriters: while frozen, a process writing as fast as it can
// writes nothing; after thaw it goes on.
func TestFreezeHoldsWriters(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			cgs := newTestCgroups(t, tl.l)
			g, err := cgs.Create("writer", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command("sh", "-c", "while :; do echo line; done > "+out)
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			if err := g.StartIn(cmd.SysProcAttr, cmd.Start); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = g.Kill(context.Background()); _ = cmd.Wait() }()
			size := func() int64 {
				fi, err := os.Stat(out)
				if err != nil {
					return 0
				}
				return fi.Size()
			}
			for size() == 0 {
				time.Sleep(time.Millisecond)
			}
			thaw, err := g.Freeze(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			before := size()
			time.Sleep(50 * time.Millisecond)
			if after := size(); after != before {
				thaw()
				t.Fatalf("a frozen writer wrote %d bytes", after-before)
			}
			thaw()
			deadline := time.Now().Add(5 * time.Second)
			for size() == before {
				if time.Now().After(deadline) {
					t.Fatal("the writer did not resume after thaw")
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
