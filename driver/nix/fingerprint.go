package nix

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flyd-dev/flyd/driver"
)

// fingerprint identifies the flake's current content: from stat for a local
// path: ref, else from `nix flake metadata`.
func (d *Driver) fingerprint(ctx context.Context, bin, flake string) (string, error) {
	if dir, ok := strings.CutPrefix(flake, "path:"); ok && !strings.Contains(dir, "?") {
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("%w: flake %s: path must be absolute", driver.ErrExec, flake)
		}
		if _, err := os.Stat(filepath.Join(dir, "flake.nix")); err != nil {
			return "", fmt.Errorf("%w: flake %s: %v", driver.ErrExec, flake, err)
		}
		if fp, err := statFingerprint(dir); err == nil {
			return fp, nil
		}
	}
	if filepath.IsAbs(flake) {
		if _, err := os.Stat(filepath.Join(flake, "flake.nix")); err != nil {
			return "", fmt.Errorf("%w: flake %s: %v", driver.ErrExec, flake, err)
		}
	}
	out, err := d.run(ctx, bin, nil, "flake", "metadata", "--json", flake)
	if err != nil {
		return "", err
	}
	var md struct {
		Path   string          `json:"path"`
		Locked json.RawMessage `json:"locked"`
		Locks  json.RawMessage `json:"locks"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		return "", fmt.Errorf("%w: nix flake metadata: bad JSON: %v", driver.ErrExec, err)
	}
	return hashOf("meta", md.Path, string(md.Locked), string(md.Locks)), nil
}

// maxFingerprintEntries bounds the stat walk; a larger tree falls back to
// nix flake metadata.
const maxFingerprintEntries = 20000

var errTooBig = errors.New("flake directory too large to fingerprint")

func statFingerprint(dir string) (string, error) {
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxFingerprintEntries {
			return errTooBig
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%o %d %d.%d %d.%d %d\x00", rel, st.Mode, st.Size,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Ino)
		if e.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "%s\x00", target)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "stat:" + hex.EncodeToString(h.Sum(nil)), nil
}
