// Package trust judges the paths flyd trusts as root: what it would run, or
// read as instructions, must not be changeable by anyone who could not
// already act as root (or as the daemon's own user).
//
// A path is judged whole, every component of it and every symlink on the
// way, and the caller goes on with what was judged: Dir returns the
// resolved path to use from then on, File and OpenIn hand back the file
// they checked as opened. A path is judged again each time it is armed
// (the workloads directory is at every rescan): a check at start alone
// trusts whoever changes it later.
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Dir refuses a directory the daemon would trust (its state, its runtime
// state, its socket's directory, its workloads directory) when someone
// other than root or the daemon's own user could change what is in it, or
// where its path leads: the daemon runs, as root, what its state and its
// workloads directory say. The directory and every directory above it must
// be owned by root or the daemon's uid and not writable by group or
// others; above it, a root-owned sticky directory such as /tmp is fine,
// since no one but root may rename or remove root's entries in it. A
// symlink on the way must be root's (or the daemon's) too, as its owner
// could point it elsewhere. A directory that does not exist yet is judged
// by the directories it would be made in.
//
// It returns the path with every symlink resolved: the caller uses that
// one from then on, so that no link changed later moves what it uses.
func Dir(what, path string) (string, error) {
	real, exists, err := resolve(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	existing := real
	if !exists {
		existing = nearestExisting(real)
	}
	if err := dirChain(existing, existing == real); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	return real, nil
}

// File opens a file the daemon reads as instructions (its config file, a
// spec file a workloads directory links to) and refuses it unless only
// root could have written it: its directory is judged as Dir judges a
// trusted directory, without the sticky exception, and the file as
// Opened does, once open, so that the file judged is the file read.
func File(what, path string) (*os.File, error) {
	real, exists, err := resolve(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !exists {
		return nil, fmt.Errorf("%s %s: %w", what, path, fs.ErrNotExist)
	}
	if err := dirChain(filepath.Dir(real), true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if err := Opened(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return f, nil
}

// OpenDir opens a trusted directory to read from, judged as Dir judges it
// and again once open: the descriptor is the directory judged, whatever
// its path is made to name afterwards.
func OpenDir(what, path string) (*os.File, error) {
	real, err := Dir(what, path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = judge(real, fi, true)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return f, nil
}

// OpenIn opens the file name of a trusted directory, open as dir, to read
// as instructions. The entry itself is never followed out of the directory
// but to a file File trusts: a symlink to a user's folder, which its owner
// could change later, or to procfs, where a process can make a root-owned
// file of its own words, is refused.
func OpenIn(dir *os.File, name string) (*os.File, error) {
	if strings.Contains(name, "/") || name == "." || name == ".." {
		return nil, fmt.Errorf("%s: not a file name", name)
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		target, err := readlinkat(dir, name)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir.Name(), target)
		}
		return File("the target of "+filepath.Join(dir.Name(), name)+",", target)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name))
	if err := Opened(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return f, nil
}

func readlinkat(dir *os.File, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	return string(buf[:n]), nil
}

// Opened refuses an open file unless only root (or the daemon's user)
// could have written it: a regular file, owned by one of them, writable by
// no group or other, and not on a filesystem the kernel makes up (procfs,
// sysfs and their kind), whose root-owned files can hold what another
// user chose.
func Opened(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return err
	}
	if name, ok := pseudo[int64(sfs.Type)]; ok {
		return fmt.Errorf("on %s, whose files the kernel makes from what processes say: refused", name)
	}
	return judge(f.Name(), fi, true)
}

// pseudo are the filesystems whose files no one wrote as a file.
var pseudo = map[int64]string{
	unix.PROC_SUPER_MAGIC: "procfs", unix.SYSFS_MAGIC: "sysfs", unix.CGROUP_SUPER_MAGIC: "cgroupfs",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2", unix.DEBUGFS_MAGIC: "debugfs", unix.TRACEFS_MAGIC: "tracefs",
	unix.SECURITYFS_MAGIC: "securityfs", unix.BPF_FS_MAGIC: "bpffs", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.EFIVARFS_MAGIC: "efivarfs", unix.PSTOREFS_MAGIC: "pstore", unix.NSFS_MAGIC: "nsfs",
	configfsMagic: "configfs", unix.BINFMTFS_MAGIC: "binfmt_misc", fusectlMagic: "fusectl",
}

// Magic numbers of linux/magic.h that x/sys/unix does not name.
const (
	configfsMagic = 0x62656570
	fusectlMagic  = 0x65735543
)

// dirChain judges dir and every directory above it; leaf says whether dir
// itself is the one trusted (which may not be writable by others even when
// sticky) rather than a parent of one still to be made.
func dirChain(dir string, leaf bool) error {
	for p := dir; ; p, leaf = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
		if err := judge(p, fi, leaf); err != nil {
			return err
		}
		if p == "/" {
			return nil
		}
	}
}

// judge refuses what someone other than root or the daemon's user owns, or
// may write: for a directory above the one trusted, a root-owned sticky
// one is fine.
func judge(p string, fi fs.FileInfo, leaf bool) error {
	st := fi.Sys().(*syscall.Stat_t)
	sticky := fi.Mode()&fs.ModeSticky != 0 && st.Uid == 0
	switch {
	case !trustedUID(st.Uid):
		return fmt.Errorf("%s is owned by uid %d, not root: whoever owns it could plant what the daemon runs as root", p, st.Uid)
	case fi.Mode().Perm()&0o022 != 0 && (leaf || !sticky):
		return fmt.Errorf("%s is writable by group or others (mode %v): they could plant what the daemon runs as root", p, fi.Mode().Perm())
	}
	return nil
}

func trustedUID(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// maxLinks bounds the symlinks followed in one path, as the kernel does.
const maxLinks = 40

// resolve makes path absolute and follows its symlinks, component by
// component, refusing one that someone other than root or the daemon's
// user owns. It says whether the whole path exists; when not, the part
// that does not is kept as written.
func resolve(path string) (string, bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false, err
	}
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, rest...)...), false, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; !trustedUID(uid) {
			return "", false, fmt.Errorf("%s is a symlink owned by uid %d, not root: whoever owns it could point it elsewhere", next, uid)
		}
		if hops++; hops > maxLinks {
			return "", false, fmt.Errorf("%s: too many levels of symbolic links", path)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", false, err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, true, nil
}

// nearestExisting is the longest prefix of a resolved path that exists.
func nearestExisting(p string) string {
	for {
		if _, err := os.Lstat(p); err == nil || p == "/" {
			return p
		}
		p = filepath.Dir(p)
	}
}

// Program refuses the program at path when it could be changed by someone
// who could not already change the running executable self: the file and
// its directory must be owned by root or by self's owner, and writable by
// no group or other. flyd's client execs its daemon program this way, so a
// daemon run as root is only ever what root, or the owner of the flyd
// being run, put there.
func Program(path, self string) error {
	sfi, err := os.Stat(self)
	if err != nil {
		return err
	}
	owner := sfi.Sys().(*syscall.Stat_t).Uid
	for i, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case i == 0 && !fi.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		case st.Uid != 0 && st.Uid != owner:
			return fmt.Errorf("%s is owned by uid %d, neither root nor the owner of %s (uid %d): it could run as root what its owner put there", p, st.Uid, self, owner)
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("%s is writable by group or others (mode %v): they could run as root what they put there", p, fi.Mode().Perm())
		}
	}
	return nil
}
