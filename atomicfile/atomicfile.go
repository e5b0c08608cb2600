// Package atomicfile replaces a file so that a crash at any moment leaves
// either its old content or its new content, never a mix or nothing:
// flyd's whole-file state (the journal's snapshots, port tables, run
// records, registry snapshots) is written through it.
//
// It is not a general file library: one write, one idea.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempInfix marks the temporary files Write creates, so that a reader can
// tell a crash's leftover from real data (IsTemp).
const tempInfix = ".tmp-"

// Write replaces path with data, mode perm: a temporary file in the same
// directory is written and synced, renamed over path, and the directory is
// synced so the rename itself survives a crash.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// Replace is Write without the syncs: atomic, not durable. It is for
// runtime state on tmpfs (the run dir), which a crash of the machine
// erases together with the processes it describes, so syncing it would
// only cost time.
func Replace(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, durable bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tempInfix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if durable {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir makes a rename or removal in dir durable: until the directory is
// synced, a crash can bring the old name back.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether a file name is one of Write's temporary files,
// left behind only by a crash.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempInfix)
}
