package sandbox

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestUsage: a cgroup's usage counts the CPU its busy process burns and
// the memory it holds, on every layout, and a missing cgroup says so.
func TestUsage(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("busy", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			startIn(t, g, exec.Command("sh", "-c", "while :; do :; done"))
			var u Usage
			deadline := time.Now().Add(20 * time.Second)
			for u.CPU < 50*time.Millisecond {
				if time.Now().After(deadline) {
					t.Fatalf("usage %+v: the busy loop never showed", u)
				}
				time.Sleep(20 * time.Millisecond)
				if u, err = g.Usage(); err != nil {
					t.Fatal(err)
				}
			}
			if u.Procs != 1 || u.Memory <= 0 {
				t.Errorf("usage %+v: want one process holding memory", u)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := g.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if err := g.Delete(); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Usage(); err == nil {
				t.Error("the usage of a deleted cgroup read without an error")
			}
		})
	}
}
