package specload

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/flyd-dev/flyd/spec"
)

// Options say how one spec file is read.
type Options struct {
	// Vars are the variables its values are given; nil is none.
	Vars Lookup
	// Warn is told of each variable used without a default that is not
	// set, which becomes an empty string. Without Warn, where no one would
	// read a warning, such a variable is an error.
	Warn func(msg string)
	// ReadEnvFile reads an env_file entry of the file (as written: the
	// reader resolves it against the file's directory). Without it,
	// env_file is refused.
	ReadEnvFile func(entry string) (map[string]string, error)
	// Dir is the file's directory, absolute: a host workload's workdir
	// when it says none, and what a relative one is resolved against
	// (spec.ParseAllIn). Empty leaves workdirs as they are.
	Dir string
}

// Parse reads the documents of the spec file name, whose content is data:
// its values interpolated, and each workload's env_file read into its env.
// Errors name the file, then the line and field (spec's), then the
// variable or env file.
func Parse(name string, data []byte, o Options) (*spec.Documents, error) {
	vars := o.Vars
	if vars == nil {
		vars = NoVars
	}
	d, err := spec.ParseAllIn(data, o.Dir, func(line int, field, v string) (string, error) {
		return Expand(v, vars, func(variable string) error {
			if o.Warn == nil {
				return fmt.Errorf("variable %s is not set (give it a default: ${%s:-…})", variable, variable)
			}
			o.Warn(fmt.Sprintf("%s: line %d: %s: variable %s is not set: using an empty string", name, line, field, variable))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, w := range d.Workloads {
		if err := withEnvFiles(w, o.ReadEnvFile); err != nil {
			return nil, fmt.Errorf("%s: workload %s: %w", name, w.Name, err)
		}
	}
	return d, nil
}

// withEnvFiles puts the variables of w's env files in its env, a later
// file over an earlier one, env and secret_env over every file, as
// compose's env_file goes under environment; the values are taken as the
// file gives them, never interpolated again.
func withEnvFiles(w *spec.Workload, read func(string) (map[string]string, error)) error {
	if len(w.EnvFile) == 0 {
		return nil
	}
	if read == nil {
		return errors.New("env_file: not read here")
	}
	merged := map[string]string{}
	for _, entry := range w.EnvFile {
		vars, err := read(entry)
		if err != nil {
			return fmt.Errorf("env_file: %w", err)
		}
		maps.Copy(merged, vars)
	}
	env := maps.Clone(w.Env)
	if env == nil {
		env = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		_, inEnv := env[k]
		_, secret := w.SecretEnv[k]
		if !inEnv && !secret {
			env[k] = merged[k]
		}
	}
	w.Env, w.EnvFile = env, nil
	if err := w.Validate(); err != nil {
		return fmt.Errorf("with its env_file: %w", err)
	}
	return nil
}
