package declarative

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
		ws, err := spec.ParseFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed or removed since the listing: its own event brings
			// another reconcile, which sees the final state.
			continue
		}
		files = append(files, fileState{name: e.Name(), ws: ws, err: err})
	}
	return files, nil
}
