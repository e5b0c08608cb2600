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
	s, err := c.pathSet(path)
	if err != nil {
		return nil, err
	}
	return c.parseSet(s, nil)
}

// pathSet is what one -f names: its spec files, read as one set (a name
// twice among them is an error), and the directory their relative paths
// and .env are found in.
type pathSet struct {
	dir   string   // as given: the file's, the directory itself, "." for stdin
	files []string // "-" is stdin
}

func (c Client) pathSet(path string) (pathSet, error) {
	s := pathSet{dir: ".", files: []string{path}}
	if path == "-" {
		return s, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return s, err
	}
	if !fi.IsDir() {
		s.dir = filepath.Dir(path)
		return s, nil
	}
	s.dir, s.files = path, nil
	entries, err := os.ReadDir(path)
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		if !e.IsDir() && IsSpecFile(e.Name()) {
			s.files = append(s.files, filepath.Join(path, e.Name()))
		}
	}
	return s, nil
}

// options are how the files of directory dir are read: its variables,
// the client's warnings, env_file entries relative to it.
func (c Client) options(dir string) (Options, error) {
	vars, err := ClientVars(c.Environ, c.EnvFiles, dir)
	if err != nil {
		return Options{}, err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return Options{}, err
	}
	return Options{Vars: vars, Warn: c.Warn, Dir: absDir, ReadEnvFile: func(entry string) (map[string]string, error) {
		if !filepath.IsAbs(entry) {
			entry = filepath.Join(dir, entry)
		}
		return ReadEnvFile(entry)
	}}, nil
}

// fileName is how messages name a file of a set.
func fileName(f string) string {
	if f == "-" {
		return "stdin"
	}
	return f
}

// readFile is a set's file's content.
func (c Client) readFile(f string) ([]byte, error) {
	if f == "-" {
		if c.Stdin == nil {
			return nil, nil
		}
		return io.ReadAll(c.Stdin)
	}
	return os.ReadFile(f)
}

// parseSet parses the files of s, their content data[i] when data is
// given (else read here).
func (c Client) parseSet(s pathSet, data [][]byte) (*spec.Documents, error) {
	o, err := c.options(s.dir)
	if err != nil {
		return nil, err
	}
	files := s.files
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
		var b []byte
		if data != nil {
			b = data[i]
		} else {
			b, p.err = c.readFile(f)
		}
		if p.err == nil {
			p.docs, p.err = Parse(fileName(f), b, fo)
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
	if err := resolveWatch(out, s.dir); err != nil {
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
