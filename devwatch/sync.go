package devwatch

// Sync: a watch entry of action sync copies what changed under its path
// into the running container's root at its target, as compose's
// develop.watch sync does: a file changed is copied (as `cp -a` would: its
// mode, owner and times), one removed is removed, a directory made is made.
// The container's root is a descriptor the Actions open while the run is
// alive (/proc/PID/root: that container's root whatever becomes of the
// pid), and every path in it is resolved inside it (openat2's
// RESOLVE_IN_ROOT): a symlink the image or the program put there leads
// somewhere in the container, never out to the host.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func (r *rule) sync(ctx context.Context, ch *changes) (string, error) {
	root, err := r.acts.Root(ctx)
	if err != nil {
		return "", err
	}
	if root < 0 {
		return "nothing done: no container runs (the next one starts from its image and volumes)", nil
	}
	defer unix.Close(root)
	rels := ch.sorted()
	src := r.root
	switch {
	case r.file != "":
		// The one file, at the target itself.
		src, rels = filepath.Join(r.root, r.file), []string{""}
	case ch.lost || ch.more > 0:
		// What changed is not all known: everything is copied again.
		rels = r.everything()
	}
	st, err := syncInto(root, r.e.Target, src, rels)
	did := st.String() + " into " + r.e.Target
	if err != nil {
		return did, fmt.Errorf("%s; then: %w", did, err)
	}
	return did, nil
}

// everything lists what is under the rule's root, but for what it ignores.
func (r *rule) everything() []string {
	var rels []string
	_ = filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		rel := r.rel(p)
		switch {
		case err != nil || rel == "":
			return nil
		case r.e.Ignored(rel) && d.IsDir():
			return filepath.SkipDir
		case r.e.Ignored(rel), !d.IsDir() && !r.e.Included(rel):
			return nil
		}
		rels = append(rels, rel)
		return nil
	})
	return rels
}

// syncStats count what a sync did.
type syncStats struct{ copied, removed, made, skipped int }

func (s syncStats) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{s.copied, "copied"}, {s.removed, "removed"}, {s.made, "made (directories)"}, {s.skipped, "skipped (neither file, directory nor link)"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return "synced nothing"
	}
	return "synced: " + strings.Join(parts, ", ")
}

// syncInto makes each of rels (paths relative to src; "" for src itself)
// in the tree whose root is the directory root at target what it is under
// src: copied,
// made or removed. Deeper paths go first, so that a directory removed
// with what it held is empty by its turn. It goes on past a failure and
// returns the first.
func syncInto(root int, target, src string, rels []string) (syncStats, error) {
	var st syncStats
	var first error
	rels = slices.Clone(rels)
	slices.Sort(rels)
	slices.Reverse(rels)
	for _, rel := range rels {
		dst := strings.TrimPrefix(filepath.Join(target, rel), "/")
		if err := syncOne(root, dst, filepath.Join(src, rel), &st); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", rel, err)
		}
	}
	return st, first
}

func syncOne(root int, dst, src string, st *syncStats) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		dir, err := openIn(root, filepath.Dir(dst))
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // not there either
		}
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		err = removeAt(dir, filepath.Base(dst))
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err == nil {
			st.removed++
		}
		return err
	}
	if err != nil {
		return err
	}
	sys := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.IsDir():
		dir, made, err := mkdirAllIn(root, dst)
		if err == nil {
			unix.Close(dir)
			st.made += made
		}
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		link, err := os.Readlink(src)
		if err != nil {
			return err
		}
		dir, made, err := mkdirAllIn(root, filepath.Dir(dst))
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		st.made += made
		// Made beside, then renamed over: never followed, never half there.
		tmp := syncTemp(dst)
		if err := unix.Symlinkat(link, dir, tmp); err != nil {
			return err
		}
		_ = unix.Fchownat(dir, tmp, int(sys.Uid), int(sys.Gid), unix.AT_SYMLINK_NOFOLLOW)
		if err := unix.Renameat(dir, tmp, dir, filepath.Base(dst)); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return err
		}
		st.copied++
		return nil
	case !fi.Mode().IsRegular():
		st.skipped++
		return nil
	}
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	dir, made, err := mkdirAllIn(root, filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	st.made += made
	tmp := syncTemp(dst)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fi.Mode().Perm()))
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chown(int(sys.Uid), int(sys.Gid))
	}
	if err == nil {
		err = out.Chmod(fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		ts := []unix.Timespec{unix.NsecToTimespec(fi.ModTime().UnixNano()), unix.NsecToTimespec(fi.ModTime().UnixNano())}
		_ = unix.UtimesNanoAt(dir, tmp, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, filepath.Base(dst))
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return err
	}
	st.copied++
	return nil
}

// syncTemp is the name a file is made under, beside where it goes.
func syncTemp(dst string) string { return ".flyd-sync." + filepath.Base(dst) }

// openIn opens the directory p of the tree at root, every symlink on the
// way resolved inside the tree.
func openIn(root int, p string) (int, error) {
	if p == "." || p == "" {
		p = "."
	}
	return unix.Openat2(root, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mkdirAllIn makes the directory p of the tree at root and those above it
// that are missing, and opens it; made counts those it made.
func mkdirAllIn(root int, p string) (fd, made int, err error) {
	if fd, err := openIn(root, p); err == nil {
		return fd, 0, nil
	}
	parts := strings.Split(filepath.Clean(p), "/")
	for i := range parts {
		parent, err := openIn(root, filepath.Join(parts[:i]...))
		if err != nil {
			return -1, made, err
		}
		err = unix.Mkdirat(parent, parts[i], 0o755)
		unix.Close(parent)
		switch {
		case err == nil:
			made++
		case errors.Is(err, unix.EEXIST):
		default:
			return -1, made, err
		}
	}
	fd, err = openIn(root, p)
	return fd, made, err
}

// removeAt removes name of the directory dir and, when it is a directory,
// what it holds; a symlink is removed, never followed.
func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	entries, err := f.ReadDir(-1)
	if err == nil {
		for _, e := range entries {
			if err = removeAt(fd, e.Name()); err != nil {
				break
			}
		}
	}
	f.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// OpenRoot opens the root directory of the container whose process pid
// is, through /proc/PID/root (O_PATH): the descriptor stays that
// container's root whatever becomes of the pid, so an Actions' Root opens
// it while it knows the run alive.
func OpenRoot(pid int) (int, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("the container's root: %w", err)
	}
	return fd, nil
}
