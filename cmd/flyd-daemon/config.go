package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"

	"go.yaml.in/yaml/v3"

	"github.com/flyd-dev/flyd/internal/trust"
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
	// It sets the socket's group and the daemon's paths: only root may
	// have written it, as for every path the daemon trusts.
	f, err := trust.File("config", path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(b) > maxConfig {
		return fmt.Errorf("config %s: over %d bytes", path, maxConfig)
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

// maxConfig bounds the config file: a few dozen keys.
const maxConfig = 1 << 20
