package specload

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/flyd-dev/flyd/internal/par"
	"github.com/flyd-dev/flyd/spec"
)

// IsSpecFile says whether a directory entry is a spec file: *.yaml, *.yml
// or *.json, not dot-named. That keeps editors' debris out: vim's swap
// files and 4913 probe, "x.yaml~" backups, emacs' ".#x.yaml" locks and
// "#x.yaml#" autosaves, and the dot-named temp files of atomic writes.
func IsSpecFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Client says how a client (flyd apply) reads spec files.
type Client struct {
	Environ  []string // the process environment, as os.Environ gives it
	EnvFiles []string // --env-file, in their order
	Stdin    io.Reader
	Warn     func(msg string)
}

// ReadPath reads what `flyd apply -f PATH` names: a spec file, every spec
// file of a directory (IsSpecFile), or "-" for stdin. Its variables are
// ClientVars' for its directory (the file's, the directory itself, or the
// current one for stdin), and env_file entries are relative to it.
func (c Client) ReadPath(path string) (*spec.Documents, error) {
	dir, files := ".", []string{path}
	if path != "-" {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			dir = filepath.Dir(path)
		} else {
			dir, files = path, nil
			entries, err := os.ReadDir(path)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if !e.IsDir() && IsSpecFile(e.Name()) {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
	}
	vars, err := ClientVars(c.Environ, c.EnvFiles, dir)
	if err != nil {
		return nil, err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	o := Options{Vars: vars, Warn: c.Warn, Dir: absDir, ReadEnvFile: func(entry string) (map[string]string, error) {
		if !filepath.IsAbs(entry) {
			entry = filepath.Join(dir, entry)
		}
		return ReadEnvFile(entry)
	}}
	// The files are read and parsed on every core, a directory of a
	// thousand specs at once; what they give, warnings and errors too,
	// comes in the files' order.
	type parsed struct {
		docs  *spec.Documents
		warns []string
		err   error
	}
	got := make([]parsed, len(files))
	par.Each(len(files), 0, func(i int) {
		f, p := files[i], &got[i]
		fo := o
		if o.Warn != nil {
			fo.Warn = func(msg string) { p.warns = append(p.warns, msg) }
		}
		var data []byte
		name := f
		if f == "-" {
			name = "stdin"
			data, p.err = io.ReadAll(c.Stdin)
		} else {
			data, p.err = os.ReadFile(f)
		}
		if p.err == nil {
			p.docs, p.err = Parse(name, data, fo)
		}
	})
	out := &spec.Documents{}
	for _, p := range got {
		for _, w := range p.warns {
			o.Warn(w)
		}
		if p.err != nil {
			return nil, p.err
		}
		out.Add(p.docs)
	}
	if err := resolveWatch(out, dir); err != nil {
		return nil, err
	}
	return out, nil
}

// resolveWatch makes the relative paths of the workloads' watch entries
// absolute, against dir (the spec file's directory, or the current one for
// stdin), as compose resolves develop.watch's paths against the project's
// directory and as env_file is read: the daemon takes absolute paths only.
func resolveWatch(d *spec.Documents, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, w := range d.Workloads {
		for i := range w.Watch {
			if p := w.Watch[i].Path; p != "" && !filepath.IsAbs(p) {
				w.Watch[i].Path = filepath.Join(abs, p)
			}
		}
	}
	return nil
}
