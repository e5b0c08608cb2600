package compose

import (
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
		return nil, located(err, o.Files)
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
