package nix

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/flyd-dev/flyd/internal/nixsystem"
)

// stubFlake is the offline stand-in for nixpkgs: `nix develop` wants a
// nixpkgs#bashInteractive, and none can be fetched here.
//
//go:embed stub/flake.nix
var stubFlake string

// ensureSetup writes, once, the local flake registry and the stub nixpkgs
// flake it names (legacyPackages.<system>.bashInteractive, which `nix
// develop` asks for), so no nix call ever reaches for the network registry.
func (d *Driver) ensureSetup() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.setup {
		return nil
	}
	stub := filepath.Join(d.CacheDir, "stub-nixpkgs")
	for _, dir := range []string{filepath.Join(d.CacheDir, "home"), filepath.Join(stub, "tools")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(d.CacheDir, 0o755); err != nil {
		return err
	}
	// Static tools, when the host has them, make the stub buildable.
	for name, src := range map[string]string{"bash": "/bin/bash-static", "busybox": "/bin/busybox"} {
		dst := filepath.Join(stub, "tools", name)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if data, err := os.ReadFile(src); err == nil {
			if err := writeFileAtomic(dst, data); err != nil {
				return err
			}
			_ = os.Chmod(dst, 0o755)
		}
	}
	flake := strings.ReplaceAll(stubFlake, "@SYSTEM@", nixsystem.Name())
	if err := writeIfChanged(filepath.Join(stub, "flake.nix"), []byte(flake)); err != nil {
		return err
	}
	reg, _ := json.Marshal(map[string]any{
		"version": 2,
		"flakes": []any{map[string]any{
			"from": map[string]string{"type": "indirect", "id": "nixpkgs"},
			"to":   map[string]string{"type": "path", "path": stub},
		}},
	})
	if err := writeIfChanged(filepath.Join(d.CacheDir, "registry.json"), reg); err != nil {
		return err
	}
	d.setup = true
	return nil
}
