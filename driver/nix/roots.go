package nix

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// An environment's GC root keeps its closure in the store, so it must live
// exactly as long as a workload may start from it: each workload records
// the key of the environment its last start used (<CacheDir>/users/NAME),
// and an environment, its cache entry and its roots go once no workload
// records it, none is being prepared, and the daemon says so: when a
// workload is removed (Forget), when a workload moves to another
// environment (its next start), and at the start-up sweep, after a crash
// too.

// hold keeps key from collection while a start prepares it.
func (d *Driver) hold(key string) {
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	if d.held == nil {
		d.held = map[string]int{}
	}
	d.held[key]++
}

func (d *Driver) unhold(key string) {
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	if d.held[key]--; d.held[key] <= 0 {
		delete(d.held, key)
	}
}

// use records that workload's runs start from key, and collects what the
// workload used before, unless someone else uses it.
func (d *Driver) use(workload, key string) error {
	path := filepath.Join(d.CacheDir, "users", workload)
	if old, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(old)) == key {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(path, []byte(key+"\n")); err != nil {
		return err
	}
	return d.collect()
}

// Forget releases what a removed workload kept: its environment's GC root,
// unless another workload uses the same environment.
func (d *Driver) Forget(ctx context.Context, workload string) error {
	if err := os.Remove(filepath.Join(d.CacheDir, "users", workload)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return d.collect()
}

// collect removes every environment no workload uses: its cache entry and
// its GC roots (the profile and the links nix made beside it).
func (d *Driver) collect() error {
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	used := map[string]bool{}
	for k := range d.held {
		used[k] = true
	}
	users, err := os.ReadDir(filepath.Join(d.CacheDir, "users"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, u := range users {
		if b, err := os.ReadFile(filepath.Join(d.CacheDir, "users", u.Name())); err == nil {
			used[strings.TrimSpace(string(b))] = true
		}
	}
	var errs []error
	envs, _ := filepath.Glob(filepath.Join(d.CacheDir, "envs", "*.json"))
	for _, e := range envs {
		if key := strings.TrimSuffix(filepath.Base(e), ".json"); !used[key] {
			errs = append(errs, removeIfThere(e))
		}
	}
	roots, _ := os.ReadDir(filepath.Join(d.CacheDir, "roots"))
	for _, r := range roots {
		// A root is the key itself, or key-N-link beside a profile.
		key, _, _ := strings.Cut(r.Name(), "-")
		if !used[key] {
			errs = append(errs, removeIfThere(filepath.Join(d.CacheDir, "roots", r.Name())))
		}
	}
	return errors.Join(errs...)
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
