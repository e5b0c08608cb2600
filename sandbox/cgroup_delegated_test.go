package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// TestDelegatedParent: a parent a manager delegated (a systemd scope) is
// used as found: missing, it is refused and not made; found, its
// children get the controllers and their limits. On a v1 or hybrid host
// there is no delegation of flyd's to use, and it says so.
func TestDelegatedParent(t *testing.T) {
	requireCgroupRoot(t)
	host, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	parent := fmt.Sprintf("flyd-test-delegated-%d-%d", os.Getpid(), testParents.Add(1))
	if host.version != 2 {
		if _, err := NewDelegatedCgroups(parent); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("NewDelegatedCgroups on a v%d host: %v, want ErrUnavailable", host.version, err)
		}
		return
	}
	dir := filepath.Join(host.hier[0].mount, parent)
	if _, err := NewDelegatedCgroups(parent); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("NewDelegatedCgroups of a missing parent: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("NewDelegatedCgroups made the missing parent %s", dir)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeEmptyTree(dir) })
	c, err := NewDelegatedCgroups(parent)
	if err != nil {
		t.Fatal(err)
	}
	on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	avail, _ := readWords(filepath.Join(dir, "cgroup.controllers"))
	for _, ctrl := range v2Controllers {
		if slices.Contains(avail, ctrl) != slices.Contains(on, ctrl) || slices.Contains(avail, ctrl) != slices.Contains(c.Controllers(), ctrl) {
			t.Errorf("controller %s: available %v, enabled for children %v, Controllers %v", ctrl, avail, on, c.Controllers())
		}
	}
	if !slices.Contains(c.Controllers(), "memory") {
		return
	}
	g, err := c.Create("web", Limits{MemoryMax: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(g.Path, "memory.max"))
	if got := strings.TrimSpace(string(b)); err != nil || got != "67108864" {
		t.Errorf("web's memory.max: %q (%v), want 67108864", got, err)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Rmdir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestEarlierParent: the parent a daemon used before it had systemd's
// scope is judged by whether a process runs under it, removed only when
// none does, and left alone while another daemon holds it.
func TestEarlierParent(t *testing.T) {
	requireCgroupRoot(t)
	host, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	parent := fmt.Sprintf("flyd-test-earlier-%d-%d", os.Getpid(), testParents.Add(1))
	if host.version != 2 {
		c, err := NewCgroups(parent)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.RemoveParent() })
		if p, err := OpenEarlierParent(parent); p != nil || err != nil {
			t.Fatalf("OpenEarlierParent on a v%d host: %v, %v; want nothing (only v2 has a scope to move to)", host.version, p, err)
		}
		return
	}
	if p, err := OpenEarlierParent(parent); p != nil || err != nil {
		t.Fatalf("OpenEarlierParent of a missing parent: %v, %v; want nothing", p, err)
	}
	c, err := NewCgroups(parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveParent() })
	g, err := c.Create("web", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if err := writeCgroupFile(filepath.Join(g.Path, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}

	// Another daemon's: not ours to judge.
	release, err := c.Claim()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := OpenEarlierParent(parent); p != nil || err != nil {
		t.Fatalf("OpenEarlierParent of a parent another daemon holds: %v, %v; want nothing", p, err)
	}
	release()

	p, err := OpenEarlierParent(parent)
	if err != nil || p == nil {
		t.Fatalf("OpenEarlierParent: %v, %v", p, err)
	}
	if busy, err := p.Populated(); err != nil || !busy {
		t.Fatalf("Populated with a process in web: %v, %v; want true", busy, err)
	}
	if err := p.Remove(); err == nil {
		t.Fatal("Remove of a parent a process runs under: no error")
	}
	if !alive(cmd.Process.Pid) {
		t.Fatal("Remove touched the process")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for busy, _ := p.Populated(); busy; busy, _ = p.Populated() {
		if time.Now().After(deadline) {
			t.Fatal("Populated stays true after the only process ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(host.hier[0].mount, parent)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the parent is still there after Remove: %v", err)
	}
}
