package declarative

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flyd-dev/flyd/spec"
)

// isSpecFile says whether a directory entry is a spec file. It is the same
// rule as `flyd apply DIR`, which also keeps editors' debris out: vim's swap
// files and 4913 probe, "x.yaml~" backups, emacs' ".#x.yaml" locks and
// "#x.yaml#" autosaves, and the dot-named temp files of atomic writes.
func isSpecFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// fileState is one spec file as read now: its workloads, or why it is bad.
type fileState struct {
	name string // base name: the owner of its workloads
	ws   []*spec.Workload
	err  error
}

// scan reads every spec file of dir, sorted by name. A missing directory is
// empty (the daemon may start before it is created); any other failure to list
// it is returned, because acting on a partial listing would delete workloads.
func scan(dir string) ([]fileState, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []fileState
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() || !isSpecFile(e.Name()) {
			continue
		}
		ws, err := parseTrusted(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed or removed since the listing: its own event brings
			// another reconcile, which sees the final state.
			continue
		}
		files = append(files, fileState{name: e.Name(), ws: ws, err: err})
	}
	return files, nil
}

// parseTrusted parses a spec file that only root (or the daemon's user)
// can have written: the daemon runs what it says, as root. The file is
// checked as opened, so the checked file is the one read whatever its
// name is made to point at meanwhile.
func parseTrusted(path string) ([]*spec.Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file", path)
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%s: owned by uid %d, not root: refused, as the daemon would run what it says as root", path, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("%s: writable by group or others (mode %v): refused, as the daemon would run what it says as root", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSpecFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSpecFile {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxSpecFile)
	}
	ws, err := spec.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ws, nil
}

// maxSpecFile bounds a spec file as the API bounds a request body.
const maxSpecFile = 1 << 20
