package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// helperEnv makes the test binary, re-executed, act as a workload.
const helperEnv = "FLYD_SANDBOX_HELPER"

// TestCgroupHelperProcess is not a test: it is the workload a test starts
// by re-executing this binary with helperEnv set.
func TestCgroupHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "alloc":
		// Touch every page, so the memory is really charged, until the
		// limit's OOM kill; 2 GiB unlimited is still harmless here.
		var keep [][]byte
		for range 256 {
			b := make([]byte, 8<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep)*8, "MiB and survived")
	}
	os.Exit(0)
}

func helperCommand(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCgroupHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

var testParents atomic.Int64

// requireCgroupRoot skips a test that writes cgroups, except in CI, where
// a skip would be a hole in the coverage nobody sees.
func requireCgroupRoot(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "creating cgroups and moving threads between them needs root")
}

type testLayout struct {
	name string
	l    layout
}

// testLayouts is the host's layout, plus any cgroup2 tree the host did not
// choose: a hybrid host's "unified" tree has no controllers, but runs
// every v2 code path except the limits.
func testLayouts(tb testing.TB) []testLayout {
	tb.Helper()
	requireCgroupRoot(tb)
	host, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	out := []testLayout{{fmt.Sprintf("host-v%d", host.version), host}}
	if host.version == 1 {
		mounts, err := readCgroupMounts("/proc/self/mountinfo")
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range mounts {
			if m.v2 {
				h := hierarchy{mount: m.point, root: m.root}
				out = append(out, testLayout{"unified-v2", layout{version: 2, hier: []hierarchy{h}, sock: &h}})
				break
			}
		}
	}
	return out
}

// hasControllers reports whether l offers the memory controller, and with
// it, on every host flyd knows, the others it limits.
func hasControllers(l layout) bool {
	if l.version == 1 {
		return slices.ContainsFunc(l.hier, func(h hierarchy) bool { return h.ctrl == "memory" })
	}
	ctrls, _ := readWords(filepath.Join(l.hier[0].mount, "cgroup.controllers"))
	return slices.Contains(ctrls, "memory")
}

// newTestCgroups makes Cgroups under a parent of its own and removes, at
// the end of the test, every cgroup under it and the parent itself.
func newTestCgroups(tb testing.TB, l layout) *Cgroups {
	tb.Helper()
	parent := fmt.Sprintf("flyd-test-%d-%d", os.Getpid(), testParents.Add(1))
	c, err := newCgroups(parent, l)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeTestCgroups(tb, c) })
	return c
}

func removeTestCgroups(tb testing.TB, c *Cgroups) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range c.l.hier {
		entries, _ := os.ReadDir(filepath.Join(h.mount, c.parent))
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			if g, err := c.Open(e.Name()); err == nil {
				if err := g.Kill(ctx); err != nil {
					tb.Errorf("cleanup: %v", err)
				}
				if err := g.Delete(); err != nil {
					tb.Errorf("cleanup: %v", err)
				}
				continue
			}
			if err := syscall.Rmdir(filepath.Join(h.mount, c.parent, e.Name())); err != nil && !errors.Is(err, syscall.ENOENT) {
				tb.Errorf("cleanup: %v", err)
			}
		}
	}
	if err := c.RemoveParent(); err != nil {
		tb.Errorf("cleanup: %v", err)
	}
	for _, h := range c.l.hier {
		if _, err := os.Stat(filepath.Join(h.mount, c.parent)); !errors.Is(err, fs.ErrNotExist) {
			tb.Errorf("cgroup parent %s survived cleanup (%v)", filepath.Join(h.mount, c.parent), err)
		}
	}
}

// startIn starts cmd in g and, at the end of the test, kills and reaps it.
func startIn(tb testing.TB, g *Cgroup, cmd *exec.Cmd) {
	tb.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if err := g.StartIn(cmd.SysProcAttr, cmd.Start); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// strayThreads maps each thread of this process that is not where the
// main thread is, in every hierarchy, to its /proc cgroup file. No test
// moves the main thread, and every thread starts where it is; a thread in
// a workload cgroup, or sent back to the wrong one, is a stray.
func strayThreads(tb testing.TB) map[string]string {
	tb.Helper()
	home, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/cgroup", pid))
	if err != nil {
		tb.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range tasks {
		data, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "cgroup"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		if string(data) != string(home) {
			out[task.Name()] = string(data)
		}
	}
	return out
}

// requireNoStrayThreads fails if a thread of this process is not home. A
// thread the runtime discards may take a moment to exit.
func requireNoStrayThreads(tb testing.TB) {
	tb.Helper()
	var strays map[string]string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strays = strayThreads(tb); len(strays) == 0 {
			return
		}
	}
	tb.Fatalf("threads away from the main thread's cgroups: %v", strays)
}

// readCgroupValue reads a file of g in the hierarchy of ctrl, trimmed.
func readCgroupValue(tb testing.TB, g *Cgroup, ctrl, file string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(g.dirFor(ctrl), file))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// alive reports whether p still runs: gone and zombie processes do not.
// survives says whether process p is still alive a while after it was
// killed. A killed task leaves cgroup.procs as it exits, a moment before
// it is a zombie (longer under emulation): that moment is not survival.
func survives(p int) bool {
	for deadline := time.Now().Add(5 * time.Second); alive(p); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return true
		}
	}
	return false
}

func alive(p int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
