package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// trustedDir refuses a directory the daemon would trust (its state, its
// runtime state, its socket's directory, its workloads directory) when
// someone other than root or the daemon's own user could change what is
// in it: the daemon runs, as root, what its state and its workloads
// directory say. The directory and every directory above it must be owned
// by root or the daemon's uid and not writable by group or others; above
// it, a root-owned sticky directory such as /tmp is fine, since no one but
// root may rename or remove root's entries in it. A directory that does
// not exist yet is judged by the directories it would be made in.
func trustedDir(what, path string) error {
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
