package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestInvalidLimitsAndNames(t *testing.T) {
	limits := []Limits{
		{MemoryMax: -1}, {CPUMax: -0.5}, {CPUMax: 0.001}, {CPUMax: math.NaN()}, {CPUMax: math.Inf(1)},
		{CPUWeight: -1}, {CPUWeight: 10001}, {PidsMax: -1},
	}
	for _, l := range limits {
		if _, err := l.settings(1); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", l, err)
		}
	}
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			for _, name := range []string{"", "Web", "a/b", "..", ".procs", "cgroup.", "a.b.c", "-a", "a_b"} {
				if _, err := c.Create(name, Limits{}); !errors.Is(err, errdefs.ErrInvalid) {
					t.Errorf("Create(%q): err = %v, want ErrInvalid", name, err)
				}
				if _, err := c.Open(name); !errors.Is(err, errdefs.ErrInvalid) {
					t.Errorf("Open(%q): err = %v, want ErrInvalid", name, err)
				}
			}
			if _, err := c.Create("web", Limits{PidsMax: -1}); !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Create with a negative limit: err = %v, want ErrInvalid", err)
			}
			if names, _ := c.List(); len(names) != 0 {
				t.Errorf("refused Creates left %v", names)
			}
			// A project's workload named like a file of the kernel's gets
			// a directory of its own, never that file.
			g, err := c.Create("cgroup.procs", Limits{})
			if err != nil {
				t.Fatalf("Create(cgroup.procs): %v", err)
			}
			if filepath.Base(g.Path) != "cgroup_procs" {
				t.Errorf("cgroup.procs is at %s, want a directory cgroup_procs", g.Path)
			}
			if names, _ := c.List(); !slices.Equal(names, []string{"cgroup.procs"}) {
				t.Errorf("List = %v, want [cgroup.procs]", names)
			}
			if err := g.Delete(); err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
	}
}

func TestCgroupLifecycle(t *testing.T) {
	for _, tl := range testLayouts(t) {
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			if _, err := newCgroups(c.parent, tl.l); err != nil {
				t.Fatalf("a second NewCgroups on the same parent: %v", err)
			}
			if c.Version() != tl.l.version {
				t.Errorf("Version() = %d, want %d", c.Version(), tl.l.version)
			}
			if _, err := c.Open("web"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("Open of a missing cgroup: err = %v, want ErrNotFound", err)
			}
			var web *Cgroup
			for _, name := range []string{"web", "db", "web"} { // the second web reuses the first
				g, err := c.Create(name, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if name == "web" {
					web = g
				}
			}
			// A directory flyd did not name is not a workload.
			if err := os.Mkdir(filepath.Join(c.l.hier[0].mount, c.parent, "Not_Ours"), 0o755); err != nil {
				t.Fatal(err)
			}
			if names, err := c.List(); err != nil || !slices.Equal(names, []string{"db", "web"}) {
				t.Fatalf("List() = %v, %v; want [db web]", names, err)
			}
			opened, err := c.Open("web")
			if err != nil || opened.Path != web.Path {
				t.Fatalf("Open(web) = %+v, %v; want path %s", opened, err, web.Path)
			}

			cmd := exec.Command("sleep", "300")
			startIn(t, web, cmd)
			if _, err := c.Create("web", Limits{}); err != nil {
				t.Fatalf("Create of a cgroup in use: %v", err)
			}
			if !web.Contains(cmd.Process.Pid) {
				t.Fatal("re-Create emptied the cgroup")
			}
			if err := web.Delete(); !errors.Is(err, errdefs.ErrConflict) {
				t.Fatalf("Delete of a cgroup in use: err = %v, want ErrConflict", err)
			}
			if err := web.Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second finds nothing to delete
				if err := web.Delete(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Open("web"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("Open after Delete: err = %v, want ErrNotFound", err)
			}
			if err := c.RemoveParent(); !errors.Is(err, errdefs.ErrConflict) {
				t.Fatalf("RemoveParent with db still there: err = %v, want ErrConflict", err)
			}
		})
	}
}

func mustOpen(tb testing.TB, c *Cgroups, name string) *Cgroup {
	tb.Helper()
	g, err := c.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestRemoveParentEveryHierarchy: on cgroup v1, a container runtime makes
// a container's cgroup under the parent in every hierarchy, those flyd does
// not use too (blkio, devices, name=systemd); RemoveParent leaves the
// parent in none of them.
func TestRemoveParentEveryHierarchy(t *testing.T) {
	requireCgroupRoot(t)
	l, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if l.version != 1 {
		t.Skip("cgroup v2: one hierarchy, which RemoveParent's own test covers")
	}
	c := newTestCgroups(t, l)
	mounts, err := readCgroupMounts("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, m := range mounts {
		if slices.ContainsFunc(l.hier, func(h hierarchy) bool { return h.mount == m.point }) || m.v2 {
			continue
		}
		d := filepath.Join(m.point, c.parent, "container-1")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, filepath.Join(m.point, c.parent))
	}
	if len(made) == 0 {
		t.Skip("every mounted v1 hierarchy is one flyd uses")
	}
	if err := c.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	for _, d := range made {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left (%v)", d, err)
		}
	}
}
