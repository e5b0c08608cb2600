package nix

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/drivertest"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/driver/nix/nixtest"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func requireNix(tb testing.TB) { tb.Helper(); nixtest.Require(tb) }

func writeFlake(tb testing.TB, dir, greeting string) {
	tb.Helper()
	nixtest.WriteFlake(tb, dir, greeting)
}

// counting returns a nix wrapper that logs each call's arguments to a file.
func counting(tb testing.TB) (bin, calls string) {
	tb.Helper()
	dir := tb.TempDir()
	real, err := exec.LookPath("nix")
	if err != nil {
		tb.Fatal(err)
	}
	bin, calls = filepath.Join(dir, "nix"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	return bin, calls
}

func countCalls(tb testing.TB, calls, sub string) int {
	data, err := os.ReadFile(calls)
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	return strings.Count(string(data), sub)
}

type fixture struct {
	d     *Driver
	flake string // flake directory
	calls string
}

func setup(tb testing.TB) *fixture {
	tb.Helper()
	requireNix(tb)
	bin, calls := counting(tb)
	f := &fixture{d: &Driver{CacheDir: tb.TempDir(), Nix: bin}, flake: tb.TempDir(), calls: calls}
	writeFlake(tb, f.flake, "hello-from-flake")
	return f
}

func (f *fixture) task(tb testing.TB, n *spec.Nix, args ...string) *driver.Task {
	tb.Helper()
	log, err := os.Create(filepath.Join(tb.TempDir(), "log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { log.Close() })
	return &driver.Task{
		Workload: "w",
		Spec:     &spec.Workload{Name: "w", Kind: spec.KindNix, Command: args, Nix: n},
		Args:     args,
		Env:      []string{"PATH=/usr/bin:/bin", "OWN=from-task", "CODEFLY__RUNTIME_CONTEXT=nix"},
		Log:      log,
	}
}

func (f *fixture) shell() *spec.Nix { return &spec.Nix{Flake: "path:" + f.flake, Shell: "default"} }

func wait(tb testing.TB, p driver.Process) driver.Exit {
	tb.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(20 * time.Second):
		tb.Fatal("process did not end")
		return driver.Exit{}
	}
}

func runToEnd(tb testing.TB, d *Driver, tk *driver.Task) string {
	tb.Helper()
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		tb.Fatal(err)
	}
	if e := wait(tb, p); !e.Success() {
		tb.Fatalf("exit %v", e)
	}
	out, err := os.ReadFile(tk.Log.Name())
	if err != nil {
		tb.Fatal(err)
	}
	return string(out)
}

func TestDevShell(t *testing.T) {
	f := setup(t)
	out := runToEnd(t, f.d, f.task(t, f.shell(), "hello"))
	for _, want := range []string{"GREETING=hello-from-flake", "CTX=nix", "OWN=from-task", "TMPDIR=" + filepath.Join(f.d.CacheDir, "tmp", "w")} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.d.CacheDir, "tmp", "w")); !os.IsNotExist(err) {
		t.Errorf("TMPDIR not removed after the run: %v", err)
	}

	// The workload's pid is the program itself, found on the devShell PATH.
	tk := f.task(t, f.shell(), "sleep", "30")
	p, err := f.d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	st := p.State()
	// Start may return before the child's exec: it is born in its cgroup
	// as a fork of this binary, then becomes the program.
	var exe, comm string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		exe, _ = os.Readlink("/proc/" + strconv.Itoa(st.PID) + "/exe")
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/comm")
		comm = strings.TrimSpace(string(b))
		if strings.HasPrefix(exe, "/nix/store/") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(exe, "/nix/store/") || comm != "sleep" {
		t.Errorf("pid %d: exe %q comm %q, want the flake's sleep", st.PID, exe, comm)
	}
	if st.Driver != spec.KindNix {
		t.Errorf("state driver = %q", st.Driver)
	}
	if fi, err := os.Stat(filepath.Join(f.d.CacheDir, "tmp", "w")); err != nil || !fi.IsDir() {
		t.Errorf("TMPDIR missing while running: %v", err)
	}
	_ = p.Kill()
	wait(t, p)
	if _, err := os.Stat(filepath.Join(f.d.CacheDir, "tmp", "w")); !os.IsNotExist(err) {
		t.Errorf("TMPDIR not removed after kill: %v", err)
	}
	if n := countCalls(t, f.calls, "print-dev-env"); n != 1 {
		t.Errorf("print-dev-env called %d times, want 1", n)
	}
}

func TestPackage(t *testing.T) {
	f := setup(t)
	out := runToEnd(t, f.d, f.task(t, &spec.Nix{Package: "path:" + f.flake + "#hello"}, "hello"))
	if !strings.Contains(out, "hello-from-package GREETING= CTX=nix") {
		t.Errorf("output %q", out)
	}
	if roots, _ := filepath.Glob(filepath.Join(f.d.CacheDir, "roots", "*")); len(roots) == 0 {
		t.Error("no GC root")
	}
}

func TestWarmStartAndEdit(t *testing.T) {
	f := setup(t)
	runToEnd(t, f.d, f.task(t, f.shell(), "hello"))
	start := time.Now()
	runToEnd(t, f.d, f.task(t, f.shell(), "hello"))
	warm := time.Since(start)
	// A new daemon with the same cache does not evaluate again either.
	d2 := &Driver{CacheDir: f.d.CacheDir, Nix: f.d.Nix}
	runToEnd(t, d2, f.task(t, f.shell(), "hello"))
	if n := countCalls(t, f.calls, "print-dev-env"); n != 1 {
		t.Fatalf("print-dev-env called %d times over three starts, want 1", n)
	}
	if n := countCalls(t, f.calls, "flake metadata"); n != 0 {
		t.Errorf("flake metadata called %d times for a path: flake, want 0", n)
	}
	t.Logf("warm start+run: %v", warm)

	writeFlake(t, f.flake, "edited-greeting")
	out := runToEnd(t, f.d, f.task(t, f.shell(), "hello"))
	if !strings.Contains(out, "GREETING=edited-greeting") {
		t.Errorf("after edit: %q", out)
	}
	if n := countCalls(t, f.calls, "print-dev-env"); n != 2 {
		t.Errorf("print-dev-env called %d times, want 2", n)
	}
	// The old environment's cache entry and root are retired.
	if envs, _ := filepath.Glob(filepath.Join(f.d.CacheDir, "envs", "*.json")); len(envs) != 1 {
		t.Errorf("cache entries = %v, want 1", envs)
	}
}

func TestErrors(t *testing.T) {
	f := setup(t)
	broken := t.TempDir()
	writeFlake(t, broken, "x")
	if err := os.WriteFile(filepath.Join(broken, "flake.nix"), []byte("{ outputs = { self }: { devShells = 1 +; }; }"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		nix  *spec.Nix
		args []string
		want string
	}{
		{"missing flake", &spec.Nix{Flake: "path:/nonexistent/flake", Shell: "default"}, []string{"hello"}, "/nonexistent/flake"},
		{"eval error", &spec.Nix{Flake: "path:" + broken, Shell: "default"}, []string{"hello"}, "syntax error"},
		{"unknown shell", &spec.Nix{Flake: "path:" + f.flake, Shell: "nope"}, []string{"hello"}, "does not provide attribute"},
		{"unknown package", &spec.Nix{Package: "path:" + f.flake + "#nope"}, []string{"hello"}, "does not provide attribute"},
		{"not on PATH", f.shell(), []string{"no-such-program-here"}, "no-such-program-here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.d.Start(context.Background(), f.task(t, tc.nix, tc.args...))
			if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrExec mentioning %q", err, tc.want)
			}
			if testing.Verbose() {
				t.Logf("%v", err)
			}
			if _, err := os.Stat(filepath.Join(f.d.CacheDir, "tmp", "w")); !os.IsNotExist(err) {
				t.Errorf("TMPDIR left behind: %v", err)
			}
		})
	}
}

func TestNixMissing(t *testing.T) {
	d := &Driver{CacheDir: t.TempDir(), Nix: "/nonexistent/nix"}
	if err := d.Available(); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("Available = %v", err)
	}
	tk := &driver.Task{Workload: "w", Spec: &spec.Workload{Name: "w", Kind: spec.KindNix, Nix: &spec.Nix{Flake: "path:/x", Shell: "default"}}, Args: []string{"x"}}
	if _, err := d.Start(context.Background(), tk); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("Start = %v", err)
	}
}

func TestRecover(t *testing.T) {
	f := setup(t)
	p, err := f.d.Start(context.Background(), f.task(t, f.shell(), "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	st := p.State()
	p.Release()
	// As the supervisor's store keeps it: its own part opaque, the run's
	// TMPDIR in it.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var kept driver.State
	if err := json.Unmarshal(b, &kept); err != nil {
		t.Fatal(err)
	}
	var rs runState
	if err := kept.Decode(&rs); err != nil || kept.Driver != spec.KindNix || rs.TmpDir != filepath.Join(f.d.CacheDir, "tmp", "w") {
		t.Fatalf("kept %s state %+v (%v), want nix with its TMPDIR", kept.Driver, rs, err)
	}
	d2 := &Driver{CacheDir: f.d.CacheDir, Nix: f.d.Nix}
	q, err := d2.Recover(context.Background(), kept)
	if err != nil {
		t.Fatal(err)
	}
	if q.State().PID != st.PID {
		t.Fatalf("adopted pid %d, want %d", q.State().PID, st.PID)
	}
	_ = q.Kill()
	wait(t, q)
	if _, err := os.Stat(filepath.Join(f.d.CacheDir, "tmp", "w")); !os.IsNotExist(err) {
		t.Errorf("TMPDIR not removed after adopted run ended: %v", err)
	}
}

func TestMerge(t *testing.T) {
	env := merge(map[string]string{"PATH": "/nix/a/bin", "A": "shell", "B": "shell"},
		[]string{"PATH=/usr/bin", "B=task", "CODEFLY__RUNTIME_CONTEXT=nix"}, "/tmp/x")
	got := strings.Join(env, " ")
	for _, want := range []string{"PATH=/nix/a/bin:/usr/bin", "A=shell", "B=task", "TMPDIR=/tmp/x", "CODEFLY__RUNTIME_CONTEXT=nix"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

func BenchmarkWarmStart(b *testing.B) {
	f := setup(b)
	log, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	tk := func() *driver.Task {
		return &driver.Task{
			Workload: "w",
			Spec:     &spec.Workload{Name: "w", Kind: spec.KindNix, Command: []string{"hello"}, Nix: f.shell()},
			Args:     []string{"hello"}, Env: []string{"PATH=/usr/bin:/bin"}, Log: log,
		}
	}
	// Warm the cache; find the program's path for the native comparison.
	p, err := f.d.Start(context.Background(), tk())
	if err != nil {
		b.Fatal(err)
	}
	<-p.Done()
	hello := ""
	if c, err := readCacheAny(f.d.CacheDir); err == nil {
		for _, dir := range strings.Split(c.Vars["PATH"], ":") {
			if _, err := os.Stat(filepath.Join(dir, "hello")); err == nil {
				hello = filepath.Join(dir, "hello")
				break
			}
		}
	}
	if hello == "" {
		b.Fatal("hello not found in the cached devShell PATH")
	}
	b.Run("nix-warm", func(b *testing.B) {
		for b.Loop() {
			p, err := f.d.Start(context.Background(), tk())
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
		}
	})
	b.Run("native", func(b *testing.B) {
		for b.Loop() {
			t := tk()
			t.Args = []string{hello}
			p, err := native.Driver{}.Start(context.Background(), t)
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
		}
	})
	b.Run("nix-develop", func(b *testing.B) {
		env := f.d.nixEnv()
		for b.Loop() {
			cmd := exec.Command("nix", "develop", "path:"+f.flake, "--command", "hello")
			cmd.Env = env
			cmd.Dir = f.d.CacheDir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}

func readCacheAny(dir string) (*prepared, error) {
	envs, _ := filepath.Glob(filepath.Join(dir, "envs", "*.json"))
	if len(envs) == 0 {
		return nil, os.ErrNotExist
	}
	return readCache(envs[0])
}

func TestSweepRemovesTmpOfUnknownWorkloads(t *testing.T) {
	d := &Driver{CacheDir: t.TempDir()}
	for _, n := range []string{"kept", "gone"} {
		if err := os.MkdirAll(filepath.Join(d.CacheDir, "tmp", n, "leftover"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sweep(context.Background(), map[string]bool{"kept": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.CacheDir, "tmp", "kept")); err != nil {
		t.Fatalf("a kept workload's directory was swept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.CacheDir, "tmp", "gone")); !os.IsNotExist(err) {
		t.Fatalf("an unknown workload's directory survived: %v", err)
	}
}

// TestRootsFollowTheirWorkloads: an environment's GC root stays while a
// workload uses it and goes with the last one; a workload of another
// flake keeps its own; a sweep after a crash forgets who is gone.
func TestRootsFollowTheirWorkloads(t *testing.T) {
	f := setup(t)
	other := t.TempDir()
	writeFlake(t, other, "from-the-other-flake")
	start := func(name string, n *spec.Nix) {
		t.Helper()
		tk := f.task(t, n, "hello")
		tk.Workload, tk.Spec.Name = name, name
		runToEnd(t, f.d, tk)
	}
	start("a", f.shell())
	start("b", f.shell())
	start("c", &spec.Nix{Flake: "path:" + other, Shell: "default"})
	roots := func() int {
		rs, _ := filepath.Glob(filepath.Join(f.d.CacheDir, "roots", "*"))
		return len(rs)
	}
	envs := func() int {
		es, _ := filepath.Glob(filepath.Join(f.d.CacheDir, "envs", "*.json"))
		return len(es)
	}
	perEnv := roots() / 2
	if envs() != 2 || perEnv == 0 || roots() != 2*perEnv {
		t.Fatalf("%d environments, %d roots; want 2 environments with their roots", envs(), roots())
	}
	if err := f.d.Forget(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if envs() != 2 || roots() != 2*perEnv {
		t.Fatalf("after removing a: %d environments, %d roots; b still uses the first", envs(), roots())
	}
	if err := f.d.Forget(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if envs() != 1 || roots() != perEnv {
		t.Fatalf("after removing b: %d environments, %d roots; want only c's", envs(), roots())
	}
	// c was removed while no daemon ran: the start-up sweep collects it.
	if err := f.d.Sweep(context.Background(), map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if envs() != 0 || roots() != 0 {
		t.Fatalf("after the sweep: %d environments, %d roots", envs(), roots())
	}
}

// TestContract runs the driver contract against the nix runtime: the
// scripts run in the flake's devShell.
func TestContract(t *testing.T) {
	f := setup(t)
	drivertest.Run(t, drivertest.Harness{
		Driver: f.d,
		Task: func(t *testing.T, name, script string) *driver.Task {
			tk := f.task(t, f.shell(), "sh", "-c", script)
			tk.Workload, tk.Spec.Name = name, name
			return tk
		},
	})
}
