package logfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	// DefaultMaxSize is the size at which a live file is rotated.
	DefaultMaxSize = 10 << 20
	// DefaultGenerations is how many rotated files are kept.
	DefaultGenerations = 3
)

// Group-readable so an operator group can read logs without root;
// never world-readable because workloads log secrets by accident.
const (
	fileMode = 0o640
	dirMode  = 0o750
)

// Open opens the live log file at path for appending, creating it
// (mode 0640) and its missing parent directories (mode 0750). Pass the
// returned file to the workload as both stdout and stderr.
//
// O_APPEND is what makes copy-then-truncate rotation safe: after Rotate
// truncates the file, the workload's next write lands at the new end
// instead of at its old offset, which would leave a hole of zeros.
func Open(path string) (*os.File, error) {
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrExist) {
		// An existing file keeps whatever mode an operator gave it.
		return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	}
	if err != nil {
		return nil, err
	}
	// The daemon's umask must not make logs unreadable to the group.
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// mkdirAll is os.MkdirAll with the mode forced past the umask on the
// directories it creates, and only on those.
func mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // created concurrently; not ours to chmod
		}
		return err
	}
	return os.Chmod(dir, dirMode)
}
