package devwatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flyd-dev/flyd/spec"
)

// Check judges a spec's watch entries at apply, as the daemon will read
// their paths: absolute (a client resolves a relative one against its
// spec file's directory), and, while watching is on, there, a directory
// or a file, and a tree within MaxDirs. It reads them as the daemon, for
// callers the daemon lets watch (root's: a caller that --peer-users
// confines is refused watching before, the API server's PeerUsersPolicy).
func Check(entries []spec.Watch, watching bool) error {
	var errs []error
	for i, e := range entries {
		field := fmt.Sprintf("watch[%d].path", i)
		if !filepath.IsAbs(e.Path) {
			errs = append(errs, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%q is relative: flyd apply and up resolve it against the spec file's directory; the API takes an absolute path", e.Path)})
			continue
		}
		if !watching {
			continue // not read until watching is on
		}
		fi, err := os.Stat(e.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, &spec.FieldError{Field: field, Msg: e.Path + " does not exist"})
			continue
		case err != nil:
			errs = append(errs, &spec.FieldError{Field: field, Msg: err.Error()})
			continue
		case !fi.IsDir() && !fi.Mode().IsRegular():
			errs = append(errs, &spec.FieldError{Field: field, Msg: e.Path + " is neither a directory nor a file"})
			continue
		case !fi.IsDir():
			continue
		}
		if err := countDirs(e); err != nil {
			errs = append(errs, &spec.FieldError{Field: field, Msg: fmt.Sprintf("%s holds %v", e.Path, err)})
		}
	}
	return errors.Join(errs...)
}

// countDirs refuses a tree of more directories to watch than the bound.
func countDirs(e spec.Watch) error {
	root, err := filepath.EvalSymlinks(e.Path)
	if err != nil {
		return err
	}
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != root && e.Ignored(strings.TrimPrefix(p, root+"/")) {
			return filepath.SkipDir
		}
		if n++; n > MaxDirs {
			return errTooManyDirs
		}
		return nil
	})
}
