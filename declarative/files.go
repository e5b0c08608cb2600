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
	"github.com/flyd-dev/flyd/specload"
)

// isSpecFile says whether a directory entry is a spec file: the same rule
// as `flyd apply DIR` (specload.IsSpecFile), which keeps editors' debris
// out.
func isSpecFile(name string) bool { return specload.IsSpecFile(name) }

// isEnvFile says whether a directory entry may give the files variables:
// the directory's .env, or a NAME.env that an env_file names.
func isEnvFile(name string) bool { return strings.HasSuffix(name, ".env") }

// fileState is one spec file as read now: its workloads and documents (as
// `flyd apply` takes them), or why it is bad.
type fileState struct {
	name string // base name: the owner of its documents
	ws   []*spec.Workload
	docs []spec.Document
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
	vars, varsErr := dotEnv(d)
	var files []fileState
	for _, e := range entries {
		if e.IsDir() || !isSpecFile(e.Name()) {
			continue
		}
		docs, err := parseTrusted(d, e.Name(), vars)
		if err == nil && varsErr != nil {
			// Every file: which of them would use it is not known.
			err = varsErr
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed or removed since the listing: its own event brings
			// another reconcile, which sees the final state.
			continue
		}
		f := fileState{name: e.Name(), err: err}
		if err == nil {
			f.ws, f.docs = docs.Workloads, docs.Docs
		}
		files = append(files, f)
	}
	withoutProfiles(dir, files)
	return files, nil
}

// dotEnv reads the directory's .env, the only source of its files'
// variables: never the daemon's own environment. The daemon trusts it as
// it trusts a spec file (root's, and no one else's to change), since its
// values become what the daemon runs.
func dotEnv(dir *os.File) (specload.Lookup, error) {
	f, err := trust.OpenIn(dir, ".env")
	if errors.Is(err, fs.ErrNotExist) {
		return specload.NoVars, nil
	}
	if err != nil {
		return specload.NoVars, fmt.Errorf("%w: refused, as the daemon would run what it says as root", err)
	}
	defer f.Close()
	vars, err := specload.ReadEnv(f.Name(), f)
	if err != nil {
		return specload.NoVars, err
	}
	return specload.Layered(vars), nil
}

// envFileIn reads an env_file entry of a spec file of the directory: the
// name of a NAME.env file beside it, trusted as the spec file is. A path
// elsewhere is refused: the daemon reads no file it does not watch, nor
// one a user could change.
func envFileIn(dir *os.File, entry string) (map[string]string, error) {
	if strings.Contains(entry, "/") || !isEnvFile(entry) || entry == ".env" {
		return nil, fmt.Errorf("%s: in the workloads directory, env_file names a NAME.env file of the directory itself", entry)
	}
	f, err := trust.OpenIn(dir, entry)
	if errors.Is(err, fs.ErrNotExist) {
		// Not wrapped: a spec file that is gone is skipped, one whose
		// env file is missing is a problem.
		return nil, fmt.Errorf("%s: no such file in the workloads directory", entry)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: refused, as the daemon would run what it says as root", err)
	}
	defer f.Close()
	return specload.ReadEnv(f.Name(), f)
}

// withoutProfiles leaves out of the files the workloads that have
// profiles: the directory asks for none. A workload left in that names
// one left out, in its file or another, makes its file a problem.
func withoutProfiles(dir string, files []fileState) {
	var out []specload.LeftOut
	for i := range files {
		f := &files[i]
		if f.err != nil {
			continue
		}
		kept := f.ws[:0:0]
		for _, w := range f.ws {
			if len(w.Profiles) == 0 {
				kept = append(kept, w)
			} else {
				out = append(out, specload.LeftOut{Name: w.Name, Profiles: w.Profiles})
			}
		}
		f.ws = kept
	}
	for i := range files {
		f := &files[i]
		if f.err != nil {
			continue
		}
		if err := specload.NeedsLeftOut(f.ws, out); err != nil {
			f.err = fmt.Errorf("%s: %w (the workloads directory asks for no profile)", filepath.Join(dir, f.name), err)
			f.ws, f.docs = nil, nil
		}
	}
}

// parseTrusted parses the spec file name of the trusted directory dir: the
// daemon runs what it says, as root, so only root (or the daemon's user)
// may have written it (trust.OpenIn). It is judged as opened, so the file
// judged is the file read, whatever its name is made to point at
// meanwhile.
func parseTrusted(dir *os.File, name string, vars specload.Lookup) (*spec.Documents, error) {
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
	// No Warn: no one would read a warning, so a variable without a
	// value or default is a problem.
	docs, err := specload.Parse(path, data, specload.Options{Vars: vars, Dir: dir.Name(),
		ReadEnvFile: func(entry string) (map[string]string, error) { return envFileIn(dir, entry) }})
	if err != nil {
		return nil, err
	}
	for _, d := range docs.Docs {
		if k, ok := spec.DocKindOf(d.DocKind()); !ok || !k.InDirectory {
			// Refused, never dropped: a file's documents are applied whole.
			return nil, fmt.Errorf("%s: %s %s: %s documents are applied with flyd apply or flyd up, not from the workloads directory", path, d.DocKind(), d.DocName(), d.DocKind())
		}
	}
	if len(docs.Workloads)+len(docs.Docs) == 0 {
		return nil, fmt.Errorf("%s: no document found", path)
	}
	return docs, nil
}

// maxSpecFile bounds a spec file as the API bounds a request body.
const maxSpecFile = 1 << 20
