// Package nix runs kind nix workloads: the command inside the environment of
// a flake's devShell, or with a flake package's bin directory first on PATH.
//
// The environment is prepared (evaluated and built by nix) once per distinct
// input and cached under CacheDir together with a GC root that keeps its
// closure alive for as long as a workload uses it (roots.go); the program
// is then started by the native driver, so that
// carriers, exec checks, users, cgroups, networks and adoption behave exactly
// as for native workloads, and the workload's pid is the program itself.
//
// Cache key. For a `path:` flake ref (without query parameters) the key is a
// fingerprint of the flake directory taken from stat alone (names, modes,
// sizes, mtimes, ctimes, inodes — flake.lock included), so a warm start runs
// no nix command at all; other refs pay one `nix flake metadata --json` call
// (~35 ms) and are keyed on the locked source's store path and lock graph.
// Either is combined with the nix version, the system, the mode and the
// shell or package name.
//
// Temporary directory. Each run gets TMPDIR=<CacheDir>/tmp/<workload>,
// created fresh at Start (whatever a previous run left is removed) and
// removed when the run ends: the returned Process closes Done only after the
// removal. An adopted run's TMPDIR comes from its state and is removed the
// same way when it ends.
package nix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Driver is the nix runtime. Use it by pointer: it holds caches.
type Driver struct {
	Native   native.Driver // the exec path
	CacheDir string        // prepared environments, GC roots, per-run TMPDIRs (e.g. <state-dir>/nix)
	Nix      string        // the nix binary; "" = look up "nix" in PATH
	// Env is appended to the environment of every nix call, after a minimal
	// one (PATH, HOME=<CacheDir>/home) and the offline defaults (NIX_CONFIG:
	// flakes enabled, no substituters, a local flake registry mapping
	// nixpkgs to a stub flake under CacheDir). A NIX_CONFIG here replaces
	// the default one entirely.
	Env []string

	// mu guards version, keyLock and setup, and is held while the stub
	// registry is written. keyLock is a lock per environment's identity,
	// held while that environment is prepared, so that one is built once;
	// gcMu is taken while one is held (hold), never the other way, and mu
	// is held with no other lock. An entry of keyLock stays for the
	// daemon's life.
	mu      sync.Mutex
	version string // `nix --version`, once known
	keyLock map[string]*sync.Mutex
	setup   bool // stub registry written

	// gcMu orders the collection of unused environments against starts,
	// and guards held, which counts the environments being prepared for a
	// start.
	gcMu sync.Mutex
	held map[string]int
}

// Kind reports spec.KindNix.
func (d *Driver) Kind() spec.Kind { return spec.KindNix }

// Capabilities: a host program in a flake's environment.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{RuntimeContext: "nix"}
}

// Available reports whether the nix binary can be found.
func (d *Driver) Available() error {
	_, err := d.binary()
	return err
}

func (d *Driver) binary() (string, error) {
	name := d.Nix
	if name == "" {
		name = "nix"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: nix binary %q not found (install nix, e.g. Debian's nix-bin): %v",
			errdefs.ErrRuntimeUnavailable, name, err)
	}
	return p, nil
}

// prepared is one cached environment.
type prepared struct {
	Key string `json:"key"`
	// Vars are the devShell's exported variables, build-time ones dropped;
	// PATH among them is prepended to the task's PATH.
	Vars map[string]string `json:"vars"`
}

// Start prepares (or reuses) the environment and starts the program through
// the native driver.
func (d *Driver) Start(ctx context.Context, t *driver.Task) (driver.Process, error) {
	if t.Spec == nil || t.Spec.Nix == nil {
		return nil, fmt.Errorf("%w: workload has no nix block", driver.ErrExec)
	}
	if d.CacheDir == "" {
		return nil, errors.New("nix driver: CacheDir is not set")
	}
	env, err := d.prepare(ctx, t)
	if err != nil {
		return nil, err
	}
	err = d.use(t.Workload, env.Key)
	d.unhold(env.Key)
	if err != nil {
		return nil, err
	}
	tmp, err := d.freshTmp(t)
	if err != nil {
		return nil, err
	}
	nt := *t
	nt.Env = merge(env.Vars, t.Env, tmp)
	p, err := d.Native.Start(ctx, &nt)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	w, err := wrap(p, tmp)
	if err != nil {
		_ = p.Kill()
		return nil, err
	}
	return w, nil
}

// Recover adopts a run through the native driver; its TMPDIR is removed when
// it ends.
func (d *Driver) Recover(ctx context.Context, s driver.State) (driver.Process, error) {
	ns, tmp := s, ""
	ns.Driver = spec.KindNative
	switch {
	case s.Version > stateVersion:
		return nil, fmt.Errorf("pid %d: a run state of version %d, from a newer flyd: not adopted", s.PID, s.Version)
	case s.Version == 0:
		// Kept no TMPDIR then: the run's environment says it.
		tmp, _ = environVar(s.PID, "TMPDIR")
	default:
		var rs runState
		if err := s.Decode(&rs); err != nil {
			return nil, err
		}
		ns.Version, ns.Data, tmp = rs.NativeVersion, rs.Native, rs.TmpDir
	}
	p, err := d.Native.Recover(ctx, ns)
	if err != nil {
		return nil, err
	}
	// Only a directory of ours is ever removed.
	if root := filepath.Join(d.CacheDir, "tmp") + "/"; tmp == "" || d.CacheDir == "" || !strings.HasPrefix(filepath.Clean(tmp), root) {
		tmp = ""
	} else {
		tmp = filepath.Clean(tmp)
	}
	w, err := wrap(p, tmp)
	if err != nil {
		p.Release() // adopted, not ours to kill: the next daemon tries again
		return nil, err
	}
	return w, nil
}

// runState is what a nix run keeps: the native driver's state of it, and
// its TMPDIR.
type runState struct {
	Native        json.RawMessage `json:"native"`
	NativeVersion int             `json:"native_version"`
	TmpDir        string          `json:"tmpdir,omitempty"`
}

const stateVersion = 1

// Sweep removes the temporary directories and the environment uses of
// workloads that no longer exist (removed while no daemon ran), then the
// environments and GC roots no workload uses; a kept workload's directory
// is renewed at its next start anyway.
func (d *Driver) Sweep(ctx context.Context, keep map[string]bool) error {
	users, _ := os.ReadDir(filepath.Join(d.CacheDir, "users"))
	for _, u := range users {
		if !keep[u.Name()] {
			_ = os.Remove(filepath.Join(d.CacheDir, "users", u.Name()))
		}
	}
	if err := d.collect(); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(d.CacheDir, "tmp"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(d.CacheDir, "tmp", e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
