package carriers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// Prefix marks codefly's own variables.
	Prefix = "CODEFLY__"
	// FilePrefix marks a variable that carries the path of a file holding
	// a value.
	FilePrefix = "CODEFLY__FILE__"
)

// FileKey is the variable that carries key's file: CODEFLY__FILE__ and the
// key without its CODEFLY__ prefix.
func FileKey(key string) string { return FilePrefix + strings.TrimPrefix(key, Prefix) }

// File is one value to deliver by file.
type File struct {
	Key   string
	Value string
}

// Pointers returns the CODEFLY__FILE__ entries for files written in dir,
// without writing anything: apply-time checks measure the environment a
// run will have before any file exists.
func Pointers(dir string, files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = FileKey(f.Key) + "=" + filepath.Join(dir, f.Key)
	}
	return out
}

// Write creates dir (0700, owned by uid:gid) and one 0600 file per value in
// it, owned by uid:gid, never following a symlink, and returns the
// CODEFLY__FILE__ entries that point at them. On error nothing is left.
func Write(dir string, uid, gid int, files []File) (entries []string, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("carrier directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("carrier directory: %w", err)
	}
	defer unix.Close(dfd)
	if err := unix.Fchown(dfd, uid, gid); err != nil {
		return nil, fmt.Errorf("carrier directory: %w", err)
	}
	for _, f := range files {
		if err := writeAt(dfd, f.Key, uid, gid, f.Value); err != nil {
			// The key is not secret; the value is never in the error.
			return nil, fmt.Errorf("carrier for %s: %w", f.Key, err)
		}
	}
	return Pointers(dir, files), nil
}

func writeAt(dfd int, name string, uid, gid int, value string) error {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := f.Chown(uid, gid); err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		return err
	}
	return f.Close()
}

// Remove deletes a carrier directory; a missing one is not an error.
func Remove(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
