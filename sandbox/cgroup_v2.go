package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// enableControllers turns on, in every cgroup from the mount down to the
// parent (the mount alone for ""), those of v2Controllers that are available there and not yet on,
// and returns the ones the parent's children get. Writing to a cgroup that
// itself holds processes fails with EBUSY ("no internal processes"): under
// systemd that is a service's own cgroup until the daemon moves into a
// leaf of it.
func enableControllers(mount, parent string) ([]string, error) {
	segs := []string{""}
	if parent != "" {
		segs = append(segs, strings.Split(parent, "/")...)
	}
	dir := mount
	for _, seg := range segs {
		dir = filepath.Join(dir, seg)
		avail, err := readWords(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("enable cgroup controllers: %w", err)
		}
		on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return nil, fmt.Errorf("enable cgroup controllers: %w", err)
		}
		for _, ctrl := range v2Controllers {
			if !slices.Contains(avail, ctrl) || slices.Contains(on, ctrl) {
				continue
			}
			err := writeCgroupFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+ctrl)
			if errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("enable cgroup controller %s in %s, which holds processes of its own (move them into a leaf cgroup first): %w", ctrl, dir, errdefs.ErrUnavailable)
			}
			if err != nil {
				return nil, fmt.Errorf("enable cgroup controller %s: %w", ctrl, err)
			}
		}
	}
	on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, fmt.Errorf("enable cgroup controllers: %w", err)
	}
	var out []string
	for _, ctrl := range v2Controllers {
		if slices.Contains(on, ctrl) {
			out = append(out, ctrl)
		}
	}
	return out, nil
}

// EarlierParent is a cgroup parent on the unified v2 hierarchy that a
// daemon used before and would not use now: the one from the root that an
// older release (or --cgroup-parent) gave the workloads, where the daemon
// now has systemd's scope. It is held as Claim holds a parent, so that the
// parent of another daemon given the same name is never judged or removed.
type EarlierParent struct {
	dir  string
	hold *os.File
}

// OpenEarlierParent finds parent on the v2 hierarchy and holds it; nil
// when the host is not v2, there is no such cgroup, or another daemon
// holds it. Close releases it.
func OpenEarlierParent(parent string) (*EarlierParent, error) {
	l, err := discoverLayout("/proc/self/mountinfo")
	if err != nil || l.version != 2 {
		return nil, nil
	}
	clean, err := cleanParent(parent)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.hier[0].mount, clean)
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup parent %q: %w", clean, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("hold cgroup parent %q: %w", clean, err)
	}
	return &EarlierParent{dir: dir, hold: f}, nil
}

// Populated reports whether a process is in the parent or in any cgroup
// under it (its cgroup.events' "populated").
func (p *EarlierParent) Populated() (bool, error) {
	n, ok, err := readKeyed(filepath.Join(p.dir, "cgroup.events"), "populated")
	if err == nil && !ok {
		err = fmt.Errorf("%s/cgroup.events has no populated line", p.dir)
	}
	return n != 0, err
}

// Remove removes the parent and the cgroups under it, deepest first; it
// fails where one holds a process.
func (p *EarlierParent) Remove() error { return removeEmptyTree(p.dir) }

// Dir is the parent's directory.
func (p *EarlierParent) Dir() string { return p.dir }

// Close releases the hold.
func (p *EarlierParent) Close() error { return p.hold.Close() }
