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

// StartWithShm is Start with dir bound at the child's /dev/shm: the
// child, and all it starts, see dir's files as their /dev/shm and the
// host's not at all. It forks on a thread of its own whose mount namespace
// is a copy of the daemon's, the host's slave (mounts the host makes later
// still reach it, none of the child's reach the host), and which joins the
// network and, on cgroup v1, the cgroup itself; the thread is thrown away
// afterwards. An empty dir is Start.
func StartWithShm(dir string, nw *Network, g *Cgroup, attr *syscall.SysProcAttr, start func() error) error {
	if dir == "" {
		return Start(nw, g, attr, start)
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
		if err := unix.Mount(dir, "/dev/shm", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s at /dev/shm: %w", dir, err)
		}
		if nw != nil {
			if err := nw.Enter(); err != nil {
				return err
			}
		}
		if g != nil {
			return g.startIn(attr, true, start)
		}
		return start()
	})
}

// Shms are the /dev/shm of projects: each a tmpfs under one directory
// (the run dir's shm/), made at the first run of its project that asks
// for it and unmounted, its files gone, after the last one ended.
type Shms struct {
	dir string

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
	if s.refs[project] == 0 && !isMountPoint(dir) {
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

// Sweep removes the /dev/shm of every project no run holds: what a daemon
// that was killed left. Call it once the runs of the last daemon are
// adopted.
func (s *Shms) Sweep() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if s.refs[e.Name()] == 0 {
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
