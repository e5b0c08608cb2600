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
// removal. An adopted run's TMPDIR is read from /proc/<pid>/environ and
// removed the same way when it ends.
package nix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/reaper"
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

	mu      sync.Mutex
	version string // `nix --version`, once known
	keyLock map[string]*sync.Mutex
	setup   bool // stub registry written

	// gcMu orders the collection of unused environments against starts:
	// held counts the environments being prepared for a start.
	gcMu sync.Mutex
	held map[string]int
}

// Kind reports spec.KindNix.
func (d *Driver) Kind() spec.Kind { return spec.KindNix }

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
	return wrap(p, tmp), nil
}

// Recover adopts a run through the native driver; its TMPDIR is removed when
// it ends.
func (d *Driver) Recover(ctx context.Context, s driver.State) (driver.Process, error) {
	p, err := d.Native.Recover(ctx, s)
	if err != nil {
		return nil, err
	}
	tmp := ""
	if v, ok := environVar(s.PID, "TMPDIR"); ok && d.CacheDir != "" {
		root := filepath.Join(d.CacheDir, "tmp") + "/"
		if strings.HasPrefix(filepath.Clean(v), root) {
			tmp = filepath.Clean(v)
		}
	}
	return wrap(p, tmp), nil
}

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
	ident := hashOf("v1", mode, installable, nixSystem())
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

func (d *Driver) nixVersion(ctx context.Context, bin string) (string, error) {
	d.mu.Lock()
	v := d.version
	d.mu.Unlock()
	if v != "" {
		return v, nil
	}
	out, err := d.run(ctx, bin, nil, "--version")
	if err != nil {
		return "", fmt.Errorf("%w: %v", errdefs.ErrRuntimeUnavailable, err)
	}
	v = strings.TrimSpace(string(out))
	d.mu.Lock()
	d.version = v
	d.mu.Unlock()
	return v, nil
}

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

// stderrTail is how many lines of nix's stderr a failure carries.
const stderrTail = 20

// run runs one nix command, returning stdout. Its stderr also goes to log,
// when set, so a build's progress lands in the workload's log.
func (d *Driver) run(ctx context.Context, bin string, log io.Writer, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = d.nixEnv()
	cmd.Dir = d.CacheDir
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if log != nil {
		cmd.Stderr = io.MultiWriter(&stderr, log)
	}
	err := reaper.Spawn(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: nix: %v", errdefs.ErrRuntimeUnavailable, err)
	}
	err = cmd.Wait()
	reaper.Forget(cmd.Process.Pid)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: nix %s: %v:\n%s", driver.ErrExec, strings.Join(args, " "), err, tail(stderr.String(), stderrTail))
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (d *Driver) nixEnv() []string {
	env := []string{
		"PATH=" + execenv.DefaultPath,
		"HOME=" + filepath.Join(d.CacheDir, "home"),
		"NIX_CONFIG=" + strings.Join([]string{
			"experimental-features = nix-command flakes",
			"substituters =",
			"flake-registry = " + filepath.Join(d.CacheDir, "registry.json"),
		}, "\n"),
	}
	return append(env, d.Env...)
}

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
	system := nixSystem()
	flake := `{
  description = "flyd offline stub of nixpkgs";
  outputs = { self }: let
    system = "` + system + `";
    tools = builtins.path { path = ./tools; name = "flyd-stub-tools"; };
  in {
    legacyPackages.${system}.bashInteractive = derivation {
      name = "bash-interactive-stub";
      inherit system;
      builder = "${tools}/bash";
      args = [ "-c" "${tools}/busybox mkdir -p $out/bin && ${tools}/busybox cp ${tools}/bash $out/bin/bash" ];
    };
  };
}
`
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

// freshTmp creates the run's TMPDIR, removing whatever a previous run left.
func (d *Driver) freshTmp(t *driver.Task) (string, error) {
	base := filepath.Join(d.CacheDir, "tmp")
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", err
	}
	name := t.Workload
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("%w: bad workload name %q", driver.ErrExec, name)
	}
	dir := filepath.Join(base, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if t.Spec.User != "" {
		a, err := execenv.Lookup(t.Spec.User)
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("%w: user %q: %v", driver.ErrExec, t.Spec.User, err)
		}
		if err := os.Chown(dir, int(a.UID), int(a.GID)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
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

// merge builds the run's environment: the devShell's variables under the
// task's own (the workload's and flyd's, CODEFLY__RUNTIME_CONTEXT among
// them, win), the devShell's PATH before the task's, and TMPDIR.
func merge(vars map[string]string, task []string, tmp string) []string {
	m := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(k, vars[k])
	}
	for _, k := range []string{"TMPDIR", "TMP", "TEMP", "TEMPDIR"} {
		set(k, tmp)
	}
	for _, kv := range task {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" && vars["PATH"] != "" {
			if v == "" {
				v = vars["PATH"]
			} else {
				v = vars["PATH"] + ":" + v
			}
		}
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

func nixSystem() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686",
		"riscv64": "riscv64", "ppc64le": "powerpc64le"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return arch + "-linux"
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

func environVar(pid int, key string) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// process is a native run whose TMPDIR is removed before Done closes.
type process struct {
	driver.Process
	tmp         string
	done        chan struct{}
	released    chan struct{}
	releaseOnce sync.Once
}

func wrap(p driver.Process, tmp string) *process {
	w := &process{Process: p, tmp: tmp, done: make(chan struct{}), released: make(chan struct{})}
	go func() {
		select {
		case <-p.Done():
			if w.tmp != "" {
				_ = os.RemoveAll(w.tmp)
			}
			close(w.done)
		case <-w.released:
		}
	}()
	return w
}

func (p *process) State() driver.State {
	s := p.Process.State()
	s.Driver = spec.KindNix
	return s
}

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Release() {
	p.releaseOnce.Do(func() { close(p.released) })
	p.Process.Release()
}

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
