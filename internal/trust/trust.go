// Package trust judges the paths flyd trusts as root: what it would run, or
// read as instructions, must not be changeable by anyone who could not
// already act as root (or as the daemon's own user).
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Dir refuses a directory the daemon would trust (its state, its
// runtime state, its socket's directory, its workloads directory) when
// someone other than root or the daemon's own user could change what is
// in it: the daemon runs, as root, what its state and its workloads
// directory say. The directory and every directory above it must be owned
// by root or the daemon's uid and not writable by group or others; above
// it, a root-owned sticky directory such as /tmp is fine, since no one but
// root may rename or remove root's entries in it. A directory that does
// not exist yet is judged by the directories it would be made in.
func Dir(what, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, exists, err := resolveExisting(abs)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	self := uint32(os.Geteuid())
	for p, leaf := real, exists; ; p, leaf = filepath.Dir(p), false {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, path, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		sticky := fi.Mode()&fs.ModeSticky != 0 && st.Uid == 0
		switch {
		case !fi.IsDir():
			return fmt.Errorf("%s %s: %s is not a directory", what, path, p)
		case st.Uid != 0 && st.Uid != self:
			return fmt.Errorf("%s %s: %s is owned by uid %d, not root: whoever owns it could plant what the daemon runs as root", what, path, p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0 && (leaf || !sticky):
			return fmt.Errorf("%s %s: %s is writable by group or others (mode %v): they could plant what the daemon runs as root", what, path, p, fi.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

// resolveExisting resolves the symlinks of path's longest existing prefix,
// so that the directories checked are the ones really used, and says
// whether that prefix is path itself.
func resolveExisting(path string) (string, bool, error) {
	for p := path; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return real, p == path, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return "", false, err
		}
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
