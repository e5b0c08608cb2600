package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// benchLimits are limits in every controller the layout has, so that the
// writes are part of the cost. The CPU quota is every core: a loop of
// starts is CPU-bound inside the cgroup, and a smaller quota would
// measure the throttling it asks for.
func benchLimits(l layout) Limits {
	if !hasControllers(l) {
		return Limits{}
	}
	return Limits{MemoryMax: 256 << 20, CPUMax: float64(runtime.NumCPU()), CPUWeight: 100, PidsMax: 512}
}

// BenchmarkCgroupCreateDelete measures a workload cgroup's whole life
// without a process: mkdir in each hierarchy, the limits, rmdir.
func BenchmarkCgroupCreateDelete(b *testing.B) {
	for _, tl := range testLayouts(b) {
		b.Run(tl.name, func(b *testing.B) {
			c := newTestCgroups(b, tl.l)
			limits := benchLimits(tl.l)
			i := 0
			for b.Loop() {
				g, err := c.Create(fmt.Sprintf("bench-%d", i), limits)
				if err != nil {
					b.Fatal(err)
				}
				i++
				if err := g.Delete(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStartIn starts /bin/true and waits for it: plainly, through
// StartIn into an existing cgroup, and with a cgroup made and removed
// around each start, as a workload's run does. The differences are what a
// cgroup adds to a start.
func BenchmarkStartIn(b *testing.B) {
	run := func(b *testing.B, start func(cmd *exec.Cmd) error) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			if err := start(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) {
		run(b, func(cmd *exec.Cmd) error { return cmd.Start() })
	})
	for _, tl := range testLayouts(b) {
		b.Run(tl.name+"/existing", func(b *testing.B) {
			c := newTestCgroups(b, tl.l)
			g, err := c.Create("bench", benchLimits(tl.l))
			if err != nil {
				b.Fatal(err)
			}
			run(b, func(cmd *exec.Cmd) error { return g.StartIn(cmd.SysProcAttr, cmd.Start) })
		})
		b.Run(tl.name+"/create-start-kill-delete", func(b *testing.B) {
			c := newTestCgroups(b, tl.l)
			limits := benchLimits(tl.l)
			for b.Loop() {
				g, err := c.Create("bench", limits)
				if err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command("/bin/true")
				cmd.SysProcAttr = &syscall.SysProcAttr{}
				if err := g.StartIn(cmd.SysProcAttr, cmd.Start); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				if err := g.Kill(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := g.Delete(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
