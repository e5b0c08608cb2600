package compose

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/flyd-dev/flyd/spec"
)

// FileNames are the names of a compose file in a directory, in the order
// docker compose looks for them.
var FileNames = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"}

// OverrideNames are the names of the override file read after it, as
// docker compose reads the first of them that is there.
var OverrideNames = []string{"compose.override.yml", "compose.override.yaml", "docker-compose.override.yml", "docker-compose.override.yaml"}

// InDir is the compose file of directory dir and its override file, if
// it has one: nil when dir holds no compose file.
func InDir(dir string) []string {
	for _, n := range FileNames {
		f := filepath.Join(dir, n)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			out := []string{f}
			for _, o := range OverrideNames {
				of := filepath.Join(dir, o)
				if fi, err := os.Stat(of); err == nil && fi.Mode().IsRegular() {
					return append(out, of)
				}
			}
			return out
		}
	}
	return nil
}

// IsFile says whether path is a compose file: one of compose's names
// (FileNames, OverrideNames), or a YAML file whose top level has
// `services:`, which no flyd document has.
func IsFile(path string) bool {
	base := filepath.Base(path)
	for _, n := range append(FileNames[:len(FileNames):len(FileNames)], OverrideNames...) {
		if base == n {
			return true
		}
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml":
	default:
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return HasServices(data)
}

// HasServices says whether YAML data has `services:` at the top level of
// a document.
func HasServices(data []byte) bool {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("services:")) {
			return true
		}
	}
	return false
}

// Options say how a compose project is read.
type Options struct {
	// Files are the compose files, merged in their order as docker
	// compose merges `-f a -f b`; the first one's directory is the
	// project's.
	Files []string
	// Name is the project's name (-p); empty: COMPOSE_PROJECT_NAME, the
	// file's `name:`, or the directory's name, as compose takes it.
	Name string
	// Environ is the process environment, for the files' ${VAR}s.
	Environ []string
	// EnvFiles replace the .env of the project's directory.
	EnvFiles []string
	// Warn is told of what is read but has no effect under flyd, each
	// message naming the file, the service and the field.
	Warn func(msg string)
}

// Project is a compose project read and mapped onto flyd's documents.
type Project struct {
	// Name is the flyd project: compose's name, made a DNS label.
	Name string
	// Model is the project as compose reads it (interpolated, merged,
	// every profile's services in).
	Model *types.Project
	// Docs are flyd's documents, each in project Name.
	Docs *spec.Documents
}

// Load reads the compose files with compose's own loader (interpolation,
// .env, extends, the files merged, validation) and maps the project onto
// flyd's documents. Every profile's services are read, each workload
// keeping its profiles: the reader selects them as it selects flyd's own
// (specload.Select).
func Load(ctx context.Context, o Options) (*Project, error) {
	if len(o.Files) == 0 {
		return nil, fmt.Errorf("no compose file")
	}
	opts := []cli.ProjectOptionsFn{
		cli.WithEnv(o.Environ),
		cli.WithProfiles([]string{"*"}),
	}
	if len(o.EnvFiles) > 0 {
		opts = append(opts, cli.WithEnvFiles(o.EnvFiles...))
	} else {
		opts = append(opts, cli.WithEnvFiles())
	}
	opts = append(opts, cli.WithDotEnv)
	if o.Name != "" {
		opts = append(opts, cli.WithName(o.Name))
	}
	po, err := cli.NewProjectOptions(o.Files, opts...)
	if err != nil {
		return nil, err
	}
	model, err := po.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(o.Files, ", "), err)
	}
	m := &mapper{model: model, warn: o.Warn, files: readRaw(model.ComposeFiles)}
	if m.warn == nil {
		m.warn = func(string) {}
	}
	docs, name, err := m.project()
	if err != nil {
		return nil, err
	}
	return &Project{Name: name, Model: model, Docs: docs}, nil
}

// rawFile is one compose file as written, to name the file a field of a
// service comes from.
type rawFile struct {
	name     string
	services map[string]map[string]any
}

func readRaw(files []string) []rawFile {
	var out []rawFile
	for _, f := range files {
		rf := rawFile{name: f}
		if data, err := os.ReadFile(f); err == nil {
			var doc struct {
				Services map[string]map[string]any `yaml:"services"`
			}
			if yaml.Unmarshal(data, &doc) == nil {
				rf.services = doc.Services
			}
		}
		out = append(out, rf)
	}
	return out
}

// fileOf is the file that gives service its field key: the last that
// has it, else the last that has the service, else the first file.
func (m *mapper) fileOf(service, key string) string {
	have := ""
	for _, f := range m.files {
		s, ok := f.services[service]
		if !ok {
			continue
		}
		if _, ok := s[key]; ok || key == "" {
			have = f.name
		} else if have == "" {
			have = f.name
		}
	}
	for i := len(m.files) - 1; i >= 0 && key != ""; i-- {
		if _, ok := m.files[i].services[service][key]; ok {
			return rel(m.files[i].name)
		}
	}
	if have == "" && len(m.files) > 0 {
		have = m.files[0].name
	}
	return rel(have)
}

// rel is a file's path as the user would write it: relative to the
// current directory when it is under it.
func rel(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return path
}
