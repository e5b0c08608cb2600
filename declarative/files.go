package declarative

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/internal/trust"
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

// fileState is one spec file as read now: its documents (workloads,
// networks, policies, as `flyd apply` takes them), or why it is bad.
type fileState struct {
	name string // base name: the owner of its documents
	ws   []*spec.Workload
	nets []*spec.Network
	pols []*spec.Policy
	err  error
}

// scan reads every spec file of dir, sorted by name. The directory is
// judged again each time (internal/trust): every component of its path, and
// every link on the way, root's and writable by no one else, so that a
// directory someone else made or swapped in since the last look is
// refused, never read. A missing directory is empty (its parent may hold
// it later); any other failure to list it is returned, because acting on a
// partial listing would delete workloads.
func scan(dir string) ([]fileState, error) {
	d, err := trust.OpenDir("workloads dir", dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var files []fileState
	for _, e := range entries {
		if e.IsDir() || !isSpecFile(e.Name()) {
			continue
		}
		docs, err := parseTrusted(d, e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed or removed since the listing: its own event brings
			// another reconcile, which sees the final state.
			continue
		}
		f := fileState{name: e.Name(), err: err}
		if err == nil {
			f.ws, f.nets, f.pols = docs.Workloads, docs.Networks, docs.Policies
		}
		files = append(files, f)
	}
	return files, nil
}

// parseTrusted parses the spec file name of the trusted directory dir: the
// daemon runs what it says, as root, so only root (or the daemon's user)
// may have written it (trust.OpenIn). It is judged as opened, so the file
// judged is the file read, whatever its name is made to point at
// meanwhile.
func parseTrusted(dir *os.File, name string) (*spec.Documents, error) {
	f, err := trust.OpenIn(dir, name)
	if err != nil {
		return nil, fmt.Errorf("%w: refused, as the daemon would run what it says as root", err)
	}
	defer f.Close()
	path := filepath.Join(dir.Name(), name)
	data, err := io.ReadAll(io.LimitReader(f, maxSpecFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSpecFile {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxSpecFile)
	}
	docs, err := spec.ParseAll(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(docs.Workloads)+len(docs.Networks)+len(docs.Policies) == 0 {
		return nil, fmt.Errorf("%s: no document found", path)
	}
	return docs, nil
}

// maxSpecFile bounds a spec file as the API bounds a request body.
const maxSpecFile = 1 << 20
