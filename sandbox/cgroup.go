package sandbox

// The cgroup half of sandbox: each workload gets a cgroup of its own under
// one parent, its process is born inside it (never moved in after the
// fork, when it could already have forked), the limits of its spec are set
// before it runs, and stopping it kills everything inside, whatever
// session or process group a child moved to. It is not a resource
// monitor (no usage statistics) and does not touch cpuset, devices, blkio
// or systemd's name=systemd hierarchy.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// Limits are a workload's resources; zero values mean no limit.
type Limits struct {
	MemoryMax int64   // bytes
	CPUMax    float64 // cores, e.g. 0.5; at least 0.01
	CPUWeight int     // 1..10000, as cgroup v2's cpu.weight (100 is the default share)
	PidsMax   int     // processes and threads
}

// Cgroups manages the workload cgroups under one parent, on whichever
// hierarchy the host has (see discoverLayout). It is safe for concurrent
// use; starts, kills and deletes of one cgroup are ordered by a lock all
// of this process's values share.
type Cgroups struct {
	parent string // relative to each mount, no leading '/'
	l      layout
	ctrls  []string // controllers a workload cgroup has
}

// Cgroup is one workload's cgroup, as Create or Open return it. Its
// methods are safe for concurrent use.
type Cgroup struct {
	Name string
	// Path is the cgroup's directory on v2, or in the primary v1
	// hierarchy (the freezer when mounted): a stable identifier to persist.
	Path string
	cg   *Cgroups
	dirs []string // one per hierarchy, in layout order
	// Fresh is true when Create has just made the cgroup: no process can
	// be inside, nor can it be frozen.
	Fresh bool
	// in says which hierarchies the cgroup is made in: all of them on v2,
	// on v1 the primary and those of the controllers its limits need.
	in []bool
	// sockDir is the cgroup in the tree its sockets are told apart by
	// (cgroup_socket.go): dirs[0] on v2, a directory of the bare v2 tree
	// beside the v1 hierarchies of a hybrid host, "" on v1 alone.
	sockDir string
}

// NewCgroups creates the parent (for example "flyd", or
// "system.slice/flyd.service/workloads" under systemd) below the root of
// each hierarchy it uses; it is idempotent. On v2 it also enables the
// memory, pids and cpu controllers down to the parent's children. An error
// wraps errdefs.ErrUnavailable when the host has no cgroup filesystem flyd
// can use.
func NewCgroups(parent string) (*Cgroups, error) {
	l, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %v: %w", err, errdefs.ErrUnavailable)
	}
	return newCgroups(parent, l)
}

func newCgroups(parent string, l layout) (*Cgroups, error) {
	p, err := cleanParent(parent)
	if err != nil {
		return nil, err
	}
	c := &Cgroups{parent: p, l: l}
	for _, h := range l.hier {
		if err := os.MkdirAll(filepath.Join(h.mount, p), 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup parent %q: %w: %w", p, err, errdefs.ErrUnavailable)
		}
		if h.ctrl != "" {
			c.ctrls = append(c.ctrls, h.ctrl)
		}
	}
	if l.version == 2 {
		if c.ctrls, err = enableControllers(l.hier[0].mount, p); err != nil {
			return nil, err
		}
	} else if l.sock != nil {
		if err := os.MkdirAll(filepath.Join(l.sock.mount, p), 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup parent %q in the cgroup2 tree: %w: %w", p, err, errdefs.ErrUnavailable)
		}
	}
	return c, nil
}

// NewDelegatedCgroups is NewCgroups for a parent that a service manager
// made and delegated to this process (a systemd scope with Delegate=yes):
// on cgroup v2 alone, the parent must exist, and the memory, pids and cpu
// controllers are enabled in it for its children and written nowhere
// above it, where the manager is the one writer. Its processes must sit in
// a leaf of it already (a cgroup with processes of its own cannot enable
// controllers for its children).
func NewDelegatedCgroups(parent string) (*Cgroups, error) {
	l, err := discoverLayout("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %v: %w", err, errdefs.ErrUnavailable)
	}
	if l.version != 2 {
		return nil, fmt.Errorf("delegated cgroup parent %q: the host's cgroups are not the unified v2 hierarchy: %w", parent, errdefs.ErrUnavailable)
	}
	p, err := cleanParent(parent)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.hier[0].mount, p)
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("delegated cgroup parent %q does not exist: %w", p, errdefs.ErrUnavailable)
	}
	c := &Cgroups{parent: p, l: l}
	if c.ctrls, err = enableControllers(dir, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// cleanParent admits a relative path of ordinary names: the parent is
// joined to every mount point, and must not climb out of it or land on a
// control file.
func cleanParent(parent string) (string, error) {
	p := strings.Trim(parent, "/")
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, "cgroup.") {
			return "", fmt.Errorf("cgroup parent %q must be a path of plain directory names: %w", parent, errdefs.ErrInvalid)
		}
	}
	return p, nil
}

// Version is 1 or 2: which cgroup API the host gave us.
func (c *Cgroups) Version() int { return c.l.version }

// Parent is the parent's path relative to the root of each hierarchy.
func (c *Cgroups) Parent() string { return c.parent }

// Controllers lists the controllers a workload cgroup has, out of memory,
// pids, cpu (and freezer on v1). A limit needs its controller.
func (c *Cgroups) Controllers() []string { return slices.Clone(c.ctrls) }

// Create makes the workload's cgroup, or reuses it as it is (processes
// inside stay), and sets every limit: a zero value resets that limit to
// none, so the cgroup ends up exactly as l says. On v1 the cgroup is made
// in the primary hierarchy and in those of the limits l sets, and removed
// from the others where it is empty. It thaws the cgroup, in case a kill
// was cut short. It is idempotent.
func (c *Cgroups) Create(name string, l Limits) (*Cgroup, error) {
	g, err := c.cgroup(name)
	if err != nil {
		return nil, err
	}
	sets, err := l.settings(c.l.version)
	if err != nil {
		return nil, err
	}
	sets, err = c.applicable(sets)
	if err != nil {
		return nil, fmt.Errorf("cgroup %q: %w", name, err)
	}
	created := false
	for i, d := range g.dirs {
		if !c.needed(i, sets) {
			// Empty: no run of this workload is inside. Busy: a run is,
			// and then the cgroup stays, with its limit reset below.
			err := unix.Rmdir(d)
			g.in[i] = err != nil && !errors.Is(err, unix.ENOENT)
			continue
		}
		err := os.Mkdir(d, 0o755)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create cgroup %q: %w", name, err)
		}
		created = created || err == nil
		g.in[i] = true
		if i == 0 {
			g.Fresh = err == nil
		}
	}
	if err := g.makeSockDir(); err != nil {
		if created {
			_ = g.Delete()
		}
		return nil, fmt.Errorf("create cgroup %q: %w", name, err)
	}
	sets = slices.DeleteFunc(sets, func(s setting) bool { return g.dirFor(s.ctrl) == "" })
	// Shared: a start may go on meanwhile, but a kill's freeze must not
	// be thawed under it.
	unlock := lockCgroup(g.Path, false)
	if !g.Fresh {
		err = g.thaw()
	}
	if err == nil {
		err = g.apply(sets)
	}
	unlock()
	if err != nil {
		if created {
			_ = g.Delete() // a half-made cgroup would look like a working one
		}
		return nil, fmt.Errorf("create cgroup %q: %w", name, err)
	}
	return g, nil
}

// Open returns an existing workload cgroup, or an error wrapping
// errdefs.ErrNotFound.
func (c *Cgroups) Open(name string) (*Cgroup, error) {
	g, err := c.cgroup(name)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(g.Path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !info.IsDir()) {
		return nil, fmt.Errorf("cgroup %q does not exist: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open cgroup %q: %w", name, err)
	}
	for i := 1; i < len(g.dirs); i++ {
		_, err := os.Stat(g.dirs[i])
		g.in[i] = err == nil
	}
	return g, nil
}

// needed reports whether a workload cgroup with these settings is made in
// hierarchy i: the primary always, on v1 another only for a limit.
func (c *Cgroups) needed(i int, sets []setting) bool {
	return i == 0 || slices.ContainsFunc(sets, func(s setting) bool { return s.limit && s.ctrl == c.l.hier[i].ctrl })
}

// List returns the names of the workload cgroups under the parent, sorted.
func (c *Cgroups) List() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(c.l.hier[0].mount, c.parent))
	if err != nil {
		return nil, fmt.Errorf("list cgroups: %w", err)
	}
	names := []string{}
	for _, e := range entries {
		if name := strings.Replace(e.Name(), "_", ".", 1); e.IsDir() && dnslabel.ValidFull(name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// Claim holds the parent for this process until release is called (or
// the process ends): a second daemon given the same parent is refused,
// naming it, so that no daemon sweeps, kills or reuses the cgroups of
// another. The hold is an exclusive flock on the parent's directory in
// every hierarchy, which dies with its holder: a killed daemon never
// blocks the next one.
func (c *Cgroups) Claim() (release func(), err error) {
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close()
		}
	}
	for _, h := range c.l.hier {
		dir := filepath.Join(h.mount, c.parent)
		f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			release()
			return nil, fmt.Errorf("hold cgroup parent %q: %w", c.parent, err)
		}
		held = append(held, f)
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("cgroup parent %q is held by another flyd daemon: give each daemon its own --cgroup-parent (the default follows --run-dir): %w", c.parent, errdefs.ErrConflict)
			}
			return nil, fmt.Errorf("hold cgroup parent %q: %w", c.parent, err)
		}
	}
	return release, nil
}

// RemoveParent removes the parent in every hierarchy, for an uninstall or
// a test's cleanup; it fails, wrapping errdefs.ErrConflict, while any
// cgroup remains under it. A missing parent is not an error. On cgroup
// v1, once the parent is gone from flyd's own hierarchies, it is removed
// from every other mounted hierarchy too, with the empty cgroups under it:
// a container runtime makes a container's cgroup in all of them (blkio,
// devices, name=systemd…), and leaves its parent there.
func (c *Cgroups) RemoveParent() error {
	if err := c.removeOwnParent(); err != nil {
		return err
	}
	if c.l.version != 1 {
		return nil
	}
	mounts, err := readCgroupMounts("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := removeEmptyTree(filepath.Join(m.point, c.parent)); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup parent %q from %s: %w", c.parent, m.point, err))
		}
	}
	return errors.Join(errs...)
}

// removeEmptyTree removes a cgroup directory and the cgroups under it,
// deepest first; one that holds a process stays, and so do those above
// it (EBUSY, an error). A missing directory is not an error.
func removeEmptyTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeEmptyTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// removeOwnParent removes the parent from the hierarchies flyd uses.
func (c *Cgroups) removeOwnParent() error {
	var errs []error
	hier := c.l.hier
	if c.l.version == 1 && c.l.sock != nil {
		hier = append(slices.Clone(hier), *c.l.sock)
	}
	for _, h := range hier {
		err := unix.Rmdir(filepath.Join(h.mount, c.parent))
		switch {
		case errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY):
			errs = append(errs, fmt.Errorf("remove cgroup parent %q: it still holds cgroups: %w", c.parent, errdefs.ErrConflict))
		case err != nil:
			errs = append(errs, fmt.Errorf("remove cgroup parent %q: %w", c.parent, err))
		}
	}
	return errors.Join(errs...)
}

// Delete removes the cgroup from every hierarchy. It fails, wrapping
// errdefs.ErrConflict, while a process is inside (Kill first); a cgroup
// that does not exist is not an error.
func (g *Cgroup) Delete() error {
	unlock := lockCgroup(g.Path, true)
	defer unlock()
	for _, d := range g.allDirs() {
		pids, err := readInts(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete cgroup %q: %w", g.Name, err)
		}
		if pids = withoutSelf(pids); len(pids) > 0 {
			return fmt.Errorf("delete cgroup %q: %d processes are still inside: %w", g.Name, len(pids), errdefs.ErrConflict)
		}
	}
	// The primary goes last: while it exists, Open finds the cgroup and a
	// second Delete can finish what a failed one left.
	all := g.allDirs()
	for i := len(all) - 1; i >= 0; i-- {
		err := unix.Rmdir(all[i])
		switch {
		case errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("delete cgroup %q: it is not empty: %w", g.Name, errdefs.ErrConflict)
		case err != nil:
			return fmt.Errorf("delete cgroup %q: %w", g.Name, err)
		}
	}
	return nil
}

// CgroupsPath is the cgroup as /proc/PID/cgroup shows it, which is also
// what an OCI runtime expects in linux.cgroupsPath.
func (g *Cgroup) CgroupsPath() string {
	h := g.cg.l.hier[0]
	return path.Join(h.root, g.cg.parent, dirOf(g.Name))
}

// dirOf is the directory of a workload's cgroup: its full name with '_'
// for the dot between project and name, which no name holds, because
// every file of the kernel's in a cgroup is named X.Y ("cgroup.procs" is
// a file, project "cgroup"'s workload "procs" a directory, cgroup_procs).
func dirOf(name string) string { return strings.Replace(name, ".", "_", 1) }

func (c *Cgroups) cgroup(name string) (*Cgroup, error) {
	if !dnslabel.ValidFull(name) {
		return nil, fmt.Errorf("cgroup name %q must be %s: %w", shorten(name), dnslabel.FullRule, errdefs.ErrInvalid)
	}
	g := &Cgroup{Name: name, cg: c, in: make([]bool, len(c.l.hier))}
	for _, h := range c.l.hier {
		g.dirs = append(g.dirs, filepath.Join(h.mount, c.parent, dirOf(name)))
	}
	g.Path, g.in[0] = g.dirs[0], true
	switch {
	case c.l.version == 2:
		g.sockDir = g.dirs[0]
	case c.l.sock != nil:
		g.sockDir = filepath.Join(c.l.sock.mount, c.parent, dirOf(name))
	}
	return g, nil
}

// shorten keeps an error message short whatever the caller passed.
func shorten(s string) string {
	if len(s) > 70 {
		return s[:64] + "..."
	}
	return s
}

// withoutSelf drops this process from a pid list: on v1 a thread of ours
// sits in a workload cgroup while it starts a child, and the daemon is
// never one of a workload's processes.
func withoutSelf(pids []int) []int {
	return slices.DeleteFunc(pids, func(p int) bool { return p == pid })
}
