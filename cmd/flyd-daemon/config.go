package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"
)

// applyConfigFile sets every flag named in the YAML file that was not set
// on the command line: the file's keys are the flags' names. A missing file
// at the default path means defaults; a missing file named explicitly is an
// error.
func applyConfigFile(fset *flag.FlagSet, path string) error {
	explicit := false
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if f.Name == "config" {
			explicit = true
		}
	})
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var kv map[string]any
	if err := yaml.Unmarshal(b, &kv); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for k, v := range kv {
		f := fset.Lookup(k)
		if f == nil || k == "config" {
			return fmt.Errorf("config %s: unknown key %q", path, k)
		}
		if set[k] {
			continue
		}
		if err := fset.Set(k, fmt.Sprint(v)); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, k, err)
		}
	}
	return nil
}
