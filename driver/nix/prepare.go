package nix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/nixsystem"
)

// prepare returns the cached environment for the task, building it on a miss.
func (d *Driver) prepare(ctx context.Context, t *driver.Task) (_ *prepared, err error) {
	bin, err := d.binary()
	if err != nil {
		return nil, err
	}
	if err := d.ensureSetup(); err != nil {
		return nil, err
	}
	version, err := d.nixVersion(ctx, bin)
	if err != nil {
		return nil, err
	}
	n := t.Spec.Nix
	mode, ref, installable := "shell", n.Flake, ""
	if n.Package != "" {
		mode, ref, installable = "package", n.Package, n.Package
	}
	flake, attr, _ := strings.Cut(ref, "#")
	if mode == "shell" {
		shell := n.Shell
		if shell == "" {
			shell = "default"
		}
		if attr == "" {
			attr = shell
		}
		installable = flake + "#" + attr
	}
	// The identity names what the workload asks for; the key adds what it
	// resolves to now.
	ident := hashOf("v1", mode, installable, nixsystem.Name())
	lk := d.lockFor(ident)
	lk.Lock()
	defer lk.Unlock()

	fp, err := d.fingerprint(ctx, bin, flake)
	if err != nil {
		return nil, err
	}
	key := hashOf(ident, version, fp)
	// Held until Start records its user: a collection meanwhile must not
	// take what is being built, or about to be used.
	d.hold(key)
	if p, err := readCache(d.cachePath(key)); err == nil && p.Key == key {
		return p, nil
	}
	defer func() {
		if err != nil {
			d.unhold(key)
		}
	}()
	if t.Preparing != nil {
		t.Preparing("building the Nix environment of " + flake)
	}
	roots := filepath.Join(d.CacheDir, "roots")
	if err := os.MkdirAll(roots, 0o755); err != nil {
		return nil, err
	}
	root := filepath.Join(roots, key)
	p := &prepared{Key: key, Vars: map[string]string{}}
	if mode == "shell" {
		out, err := d.run(ctx, bin, t.Log, "print-dev-env", "--json", "--profile", root, installable)
		if err != nil {
			return nil, err
		}
		var dev struct {
			Variables map[string]struct {
				Type  string          `json:"type"`
				Value json.RawMessage `json:"value"`
			} `json:"variables"`
		}
		if err := json.Unmarshal(out, &dev); err != nil {
			return nil, fmt.Errorf("%w: nix print-dev-env: bad JSON: %v", driver.ErrExec, err)
		}
		for k, v := range dev.Variables {
			var s string
			if v.Type != "exported" || json.Unmarshal(v.Value, &s) != nil || dropped(k, s) {
				continue
			}
			p.Vars[k] = s
		}
	} else {
		out, err := d.run(ctx, bin, t.Log, "build", "--json", "--out-link", root, installable)
		if err != nil {
			return nil, err
		}
		var built []struct {
			Outputs map[string]string `json:"outputs"`
		}
		if err := json.Unmarshal(out, &built); err != nil {
			return nil, fmt.Errorf("%w: nix build: bad JSON: %v", driver.ErrExec, err)
		}
		var bins []string
		for _, b := range built {
			names := make([]string, 0, len(b.Outputs))
			for name := range b.Outputs {
				names = append(names, name)
			}
			slices.Sort(names) // deterministic; "bin" sorts before "out"
			for _, name := range names {
				if fi, err := os.Stat(filepath.Join(b.Outputs[name], "bin")); err == nil && fi.IsDir() {
					bins = append(bins, filepath.Join(b.Outputs[name], "bin"))
				}
			}
		}
		if len(bins) == 0 {
			return nil, fmt.Errorf("%w: nix package %s has no bin directory", driver.ErrExec, installable)
		}
		p.Vars["PATH"] = strings.Join(bins, ":")
	}
	if err := writeCache(d.cachePath(key), p); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *Driver) cachePath(key string) string {
	return filepath.Join(d.CacheDir, "envs", key+".json")
}

func (d *Driver) lockFor(k string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keyLock == nil {
		d.keyLock = map[string]*sync.Mutex{}
	}
	l := d.keyLock[k]
	if l == nil {
		l = &sync.Mutex{}
		d.keyLock[k] = l
	}
	return l
}

// dropped are the build-time variables of print-dev-env that make no sense
// at run time.
func dropped(k, v string) bool {
	switch k {
	case "TMP", "TMPDIR", "TEMP", "TEMPDIR", "NIX_BUILD_TOP", "NIX_LOG_FD", "TERM",
		"out", "outputs", "builder", "OLDPWD", "PWD", "SHLVL", "HOSTNAME", "LINENO":
		return true
	case "HOME":
		return v == "/homeless-shelter"
	}
	return false
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func readCache(path string) (*prepared, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p prepared
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func writeCache(path string, p *prepared) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data)
}

func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return writeFileAtomic(path, data)
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	_ = os.Chmod(f.Name(), 0o644)
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
