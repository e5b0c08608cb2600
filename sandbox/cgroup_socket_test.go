package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

// A workload's child is born into its cgroup of the v2 tree too, on a
// hybrid host beside its v1 hierarchies: the kernel stamps its sockets
// with that cgroup, whose id SocketID gives, at the level SocketTree says.
func TestSocketCgroup(t *testing.T) {
	layouts := testLayouts(t)
	if h := layouts[0].l; h.version == 1 {
		// A host of v1 alone: the same hierarchies without the v2 tree.
		h.sock = nil
		layouts = append(layouts, testLayout{"v1-alone", h})
	}
	for _, tl := range layouts {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			if tl.l.sock == nil {
				if _, err := c.SocketTree(); !errors.Is(err, errdefs.ErrUnavailable) {
					t.Fatalf("SocketTree on v1 alone: err = %v, want ErrUnavailable", err)
				}
				return
			}
			tree, err := c.SocketTree()
			if err != nil {
				t.Fatal(err)
			}
			if tree.ParentLevel != 1 {
				t.Errorf("ParentLevel = %d, want 1 for %q", tree.ParentLevel, c.parent)
			}
			if _, err := c.SocketID("sock"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("SocketID before Create: err = %v, want ErrNotFound", err)
			}
			g, err := c.Create("sock", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.SocketID("sock")
			if err != nil || id == 0 || id == tree.Parent {
				t.Fatalf("SocketID = %d, %v (parent %d)", id, err, tree.Parent)
			}
			out := filepath.Join(t.TempDir(), "cgroup")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cat := exec.Command("cat", "/proc/self/cgroup")
			cat.Stdout = f
			cat.SysProcAttr = &syscall.SysProcAttr{}
			if err := g.StartIn(cat.SysProcAttr, cat.Start); err != nil {
				t.Fatal(err)
			}
			if err := cat.Wait(); err != nil {
				t.Fatal(err)
			}
			if cat.SysProcAttr.UseCgroupFD {
				t.Error("StartIn left CLONE_INTO_CGROUP set")
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			want := "0::" + path.Join(tl.l.sock.root, c.parent, "sock")
			if !strings.Contains(string(data), want+"\n") {
				t.Errorf("the child's cgroups are\n%s\nwant the line %s", data, want)
			}
			if tl.l.version == 1 {
				requireBornIn(t, out, g)
			}
			if err := g.Delete(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(tl.l.sock.mount, c.parent, "sock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the cgroup's v2 directory survived Delete: %v", err)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	for p, want := range map[string]int{"/": 0, "": 0, "flyd": 1, "/flyd/": 1, "system.slice/flyd.service/workloads": 3} {
		if got := depth(p); got != want {
			t.Errorf("depth(%q) = %d, want %d", p, got, want)
		}
	}
}
