package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// Mounts are what a run sees in place of the host's: directories of the
// host bound in its own mount namespace. An empty one keeps the host's.
type Mounts struct {
	// Shm is bound at /dev/shm: its project's (Shms).
	Shm string
	// Tmp holds the run's own /tmp (Tmp/tmp) and /var/tmp (Tmp/var-tmp),
	// as systemd's PrivateTmp=.
	Tmp string
	// Hosts is a file bound read-only at /etc/hosts: its network's, which
	// names the workloads in it (package mounts). The host's stays where
	// it has none.
	Hosts string
}

// StartWithMounts is Start with m bound in the child's mount namespace:
// the child, and all it starts, see m's directories in place of the
// host's, and the host's not at all. It forks on a thread of its own whose
// mount namespace is a copy of the daemon's, the host's slave (mounts the
// host makes later still reach it, none of the child's reach the host),
// and which joins the network and, on cgroup v1, the cgroup itself; the
// thread is thrown away afterwards. Empty mounts are Start.
func StartWithMounts(m Mounts, nw *Network, g *Cgroup, attr *syscall.SysProcAttr, start func() error) error {
	if m == (Mounts{}) {
		return Start(nw, g, attr, start)
	}
	type bind struct {
		from, at string
		file     bool // a file, bound read-only
	}
	binds := []bind{{from: m.Shm, at: "/dev/shm"}}
	if m.Tmp != "" {
		binds = append(binds, bind{from: filepath.Join(m.Tmp, "tmp"), at: "/tmp"},
			bind{from: filepath.Join(m.Tmp, "var-tmp"), at: "/var/tmp"})
	}
	if m.Hosts != "" {
		// A host without /etc/hosts has nothing to bind over.
		if _, err := os.Stat("/etc/hosts"); err == nil {
			binds = append(binds, bind{from: m.Hosts, at: "/etc/hosts", file: true})
		}
	}
	// The network is opened before anything is bound: its namespace may
	// be kept under a directory a bind hides (a run dir under /tmp or
	// /dev/shm).
	nsfd := -1
	if nw != nil {
		fd, err := openNamespace(nw.Name, nw.Path)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		nsfd = fd
	}
	return onThrowawayThread(func() error {
		// unshare(CLONE_NEWNS) moves only this thread, whose fs
		// attributes (CLONE_FS, implied) become its own.
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("a mount namespace of its own: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return fmt.Errorf("a mount namespace of its own: make / a slave: %w", err)
		}
		// Every source is opened before the first bind, which could
		// hide another (a source under /tmp, once /tmp is bound).
		fds := make([]int, len(binds))
		for i, b := range binds {
			fds[i] = -1
			if b.from == "" {
				continue
			}
			flags := unix.O_PATH | unix.O_CLOEXEC
			if !b.file {
				flags |= unix.O_DIRECTORY
			}
			fd, err := unix.Open(b.from, flags, 0)
			if err != nil {
				return fmt.Errorf("bind %s at %s: %w", b.from, b.at, err)
			}
			defer unix.Close(fd)
			fds[i] = fd
		}
		for i, b := range binds {
			if fds[i] < 0 {
				continue
			}
			if err := unix.Mount(fmt.Sprintf("/proc/thread-self/fd/%d", fds[i]), b.at, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s at %s: %w", b.from, b.at, err)
			}
			if b.file {
				// Its network's runs share it: none may change it.
				if err := unix.Mount("", b.at, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
					return fmt.Errorf("bind %s at %s read-only: %w", b.from, b.at, err)
				}
			}
		}
		if nsfd >= 0 {
			if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("enter network %q: %w", nw.Name, err)
			}
		}
		if g != nil {
			return g.startIn(attr, true, start)
		}
		return start()
	})
}

// MakeTmp makes a run's own /tmp and /var/tmp (Mounts.Tmp) under root:
// a directory of root's alone holding the two, each as the host's (anyone
// may make a file, its owner alone removes it).
func MakeTmp(root, name string) (string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(root, name+".")
	if err != nil {
		return "", err
	}
	for _, d := range []string{"tmp", "var-tmp"} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o700); err == nil {
			err = os.Chmod(p, 0o1777)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// Shms are the /dev/shm of projects: each a tmpfs under one directory
// (the run dir's shm/), made at the first run of its project that asks
// for it and unmounted, its files gone, after the last one ended.
type Shms struct {
	dir string

	// mu guards refs, and is held while a project's tmpfs is mounted or
	// removed, so that a run never binds one that is going.
	mu   sync.Mutex
	refs map[string]int // by project: the runs that hold its tmpfs
}

// NewShms keeps the projects' /dev/shm under dir, which it makes.
func NewShms(dir string) (*Shms, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Shms{dir: dir, refs: map[string]int{}}, nil
}

// Acquire holds project's /dev/shm for one run, making it at the first:
// it answers the directory to bind there (WithShm).
func (s *Shms) Acquire(project string) (string, error) {
	if !dnslabel.Valid(project) {
		return "", fmt.Errorf("%w: project %q has no /dev/shm of its own", errdefs.ErrInvalid, project)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.dir, project)
	// Mounted at the first run, or again when what an earlier daemon
	// mounted is gone.
	if !isMountPoint(dir) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("/dev/shm of project %s: %w", project, err)
		}
		// As the host's: anyone may make a file, a file's owner alone
		// removes it.
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return "", fmt.Errorf("/dev/shm of project %s: mount a tmpfs: %w", project, err)
		}
	}
	s.refs[project]++
	return dir, nil
}

// Hold counts a run of an earlier daemon that holds project's /dev/shm
// (its mount namespace keeps the tmpfs whether or not it is still mounted
// here): the last run's end removes it.
func (s *Shms) Hold(project string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs[project]++
}

// Dir is project's /dev/shm as a run binds it: "" when no tmpfs of it is
// mounted here (an earlier daemon's run keeps its own in its mount
// namespace).
func (s *Shms) Dir(project string) string {
	dir := filepath.Join(s.dir, project)
	if !dnslabel.Valid(project) || !isMountPoint(dir) {
		return ""
	}
	return dir
}

// Release lets go of one run's hold; after the last, the project's tmpfs
// is unmounted and its files are gone.
func (s *Shms) Release(project string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs[project] == 0 {
		return nil
	}
	if s.refs[project]--; s.refs[project] > 0 {
		return nil
	}
	delete(s.refs, project)
	return remove(filepath.Join(s.dir, project))
}

// Sweep removes the /dev/shm of every project neither a run holds nor
// keep names: what a daemon that was killed left.
func (s *Shms) Sweep(keep map[string]bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if s.refs[e.Name()] == 0 && !keep[e.Name()] {
			errs = append(errs, remove(filepath.Join(s.dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// remove unmounts a project's tmpfs (lazily: a process still in it keeps
// it until it ends) and its mount point.
func remove(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// isMountPoint says whether dir is a mount point: on another device than
// its parent.
func isMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}
