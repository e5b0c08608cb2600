package sandbox

// The socket half of a workload's cgroup. The kernel records in every
// socket the v2 cgroup of the process that made it, whatever v1
// hierarchies that process is also in, and nftables can match it (`socket
// cgroupv2 level N`), which is how the processes of one network namespace
// are told apart. So every workload is also in a v2 cgroup of its own:
// its cgroup itself on v2, and on a hybrid host a cgroup of the same name
// in the bare v2 tree beside the v1 hierarchies, which the child is born
// into with CLONE_INTO_CGROUP while its forking thread sits in the v1
// ones. A host of v1 alone has no such tree, and its workloads' sockets
// cannot be told apart (SocketTree says so).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// SocketTree is where a daemon's workloads are in the v2 tree, as a packet
// filter matches a socket's cgroup: the id of their parent and the level
// of their own cgroups (the root is level 0).
type SocketTree struct {
	Mount  string // where the v2 tree is mounted
	Parent uint64 // the parent's cgroup id
	// ParentLevel is the parent's level; a workload's cgroup is one below.
	ParentLevel int
}

// SocketTree says where the workloads' sockets are told apart, or fails,
// wrapping errdefs.ErrUnavailable, on a host without a v2 tree.
func (c *Cgroups) SocketTree() (SocketTree, error) {
	h := c.l.sock
	if h == nil {
		return SocketTree{}, fmt.Errorf("no cgroup2 tree is mounted beside the v1 hierarchies, so the sockets of one network's workloads cannot be told apart: %w", errdefs.ErrUnavailable)
	}
	id, err := cgroupID(filepath.Join(h.mount, c.parent))
	if err != nil {
		return SocketTree{}, fmt.Errorf("cgroup parent %q in the cgroup2 tree: %w", c.parent, err)
	}
	return SocketTree{Mount: h.mount, Parent: id, ParentLevel: depth(h.root) + depth(c.parent)}, nil
}

// SocketID is the id of a workload's cgroup in the v2 tree, as its
// sockets carry it; it wraps errdefs.ErrNotFound while the workload has
// no cgroup there, and errdefs.ErrUnavailable on a host without the tree.
func (c *Cgroups) SocketID(name string) (uint64, error) {
	g, err := c.cgroup(name)
	if err != nil {
		return 0, err
	}
	return g.SocketID()
}

// SocketID is SocketID of the cgroup.
func (g *Cgroup) SocketID() (uint64, error) {
	if g.sockDir == "" {
		return 0, fmt.Errorf("cgroup %q: no cgroup2 tree: %w", g.Name, errdefs.ErrUnavailable)
	}
	id, err := cgroupID(g.sockDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("cgroup %q does not exist: %w", g.Name, errdefs.ErrNotFound)
	}
	return id, err
}

// cgroupID is a v2 cgroup's id: its directory's inode number, which is
// what the kernel hands a socket filter (cgroup_id() is the kernfs node's
// id, and kernfs gives it as the inode number on 64-bit hosts).
func cgroupID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return st.Ino, nil
}

// depth is how many names a cgroup path has below the tree's root.
func depth(p string) int {
	p = strings.Trim(filepath.Clean("/"+p), "/")
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// makeSockDir makes the cgroup's directory in a hybrid host's v2 tree
// (on v2 it is the cgroup itself, made already).
func (g *Cgroup) makeSockDir() error {
	if g.cg.l.version == 2 || g.sockDir == "" {
		return nil
	}
	if err := os.Mkdir(g.sockDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("in the cgroup2 tree: %w", err)
	}
	return nil
}

// allDirs are the cgroup's directories, the primary first and, on a
// hybrid host, the v2 one last.
func (g *Cgroup) allDirs() []string {
	if g.cg.l.version == 2 || g.sockDir == "" {
		return g.dirs
	}
	return append(g.dirs[:len(g.dirs):len(g.dirs)], g.sockDir)
}

// intoSockDir sets CLONE_INTO_CGROUP in attr for a hybrid host's v2 tree,
// where the v1 thread moves do not reach; cleanup undoes it once the
// child exists. Nothing to do on v2 (Attr) or v1 alone.
func (g *Cgroup) intoSockDir(attr *syscall.SysProcAttr) (cleanup func(), err error) {
	if g.cg.l.version == 2 || g.sockDir == "" {
		return func() {}, nil
	}
	fd, err := unix.Open(g.sockDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// A run adopted from a daemon that made none: an exec beside it
		// gets the directory now.
		if err = g.makeSockDir(); err == nil {
			fd, err = unix.Open(g.sockDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open cgroup %q in the cgroup2 tree: %w", g.Name, err)
	}
	use, old := attr.UseCgroupFD, attr.CgroupFD
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	return func() {
		attr.UseCgroupFD, attr.CgroupFD = use, old
		unix.Close(fd)
	}, nil
}
