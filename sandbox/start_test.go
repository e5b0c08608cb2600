package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStartInNetworkAndCgroup: a child started through Start is in both
// the network and the cgroup, and no thread of this process stays in
// either.
func TestStartInNetworkAndCgroup(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) { testStartInBoth(t, tl.l) })
	}
}

func testStartInBoth(t *testing.T, l layout) {
	nets, err := NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nw, err := nets.Ensure("both")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nets.Delete("both") })
	cgs := newTestCgroups(t, l)
	g, err := cgs.Create("both", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	var nsOfNetwork string
	if err := nw.Do(func() error {
		nsOfNetwork, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		cmd := exec.Command("sleep", "10")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		if err := Start(nw, g, cmd.SysProcAttr, cmd.Start); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if ns != nsOfNetwork || !g.Contains(pid) {
			t.Fatalf("child %d: netns %s (want %s), in cgroup %v", pid, ns, nsOfNetwork, g.Contains(pid))
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, task := range tasks {
		ns, _ := os.Readlink(filepath.Join(task, "ns/net"))
		if ns != hostNet {
			t.Errorf("thread %s left in %s", filepath.Base(task), ns)
		}
		cg, _ := os.ReadFile(filepath.Join(task, "cgroup"))
		if strings.Contains(string(cg), "/"+g.Name) && strings.Contains(string(cg), cgs.Parent()) {
			t.Errorf("thread %s left in the cgroup: %s", filepath.Base(task), cg)
		}
	}
}
