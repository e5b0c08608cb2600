package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
