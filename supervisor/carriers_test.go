package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// envOf reads a live process's environment from /proc. Just past exec the
// kernel may not have set it yet, and it reads empty for a moment.
func envOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); len(b) == 0; time.Sleep(time.Millisecond) {
		var err error
		if b, err = os.ReadFile(filepath.Join("/proc", itoa(pid), "environ")); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d shows no environment", pid)
		}
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func TestLargeValuesArriveAsFilesAndLeaveWithTheRun(t *testing.T) {
	testenv.RequireRoot(t, "needs root to run a workload as nobody")
	d := newDirs(t)
	s := open(t, d, true)
	defer shut(s)
	ctx := context.Background()
	big := strings.Repeat("0123456789abcdef", 72<<10/16) // 72 KiB
	w := shSpec("carried", "exec sleep 100")
	w.User = "nobody"
	w.SecretEnv = map[string]string{"CODEFLY__BIG_SECRET": big}
	got, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" {
		t.Fatalf("state %s: %s", got.State, got.LastError)
	}
	env := envOf(t, got.PID)
	if _, inline := env["CODEFLY__BIG_SECRET"]; inline {
		t.Fatal("a 72 KiB value was delivered inline")
	}
	path := env["CODEFLY__FILE__BIG_SECRET"]
	if !filepath.IsAbs(path) || !strings.HasPrefix(path, filepath.Join(d.run, "carriers")) {
		t.Fatalf("carrier path %q", path)
	}
	content, err := os.ReadFile(path)
	if err != nil || string(content) != big {
		t.Fatalf("carrier content differs (%d bytes, %v)", len(content), err)
	}
	for _, c := range []struct {
		p    string
		mode os.FileMode
	}{{filepath.Dir(path), os.ModeDir | 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || st.Uid != 65534 {
			t.Fatalf("%s: mode %v uid %d", c.p, fi.Mode(), st.Uid)
		}
	}
	// The process ends (a crash): its carriers go with it.
	if err := syscall.Kill(got.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, filepath.Dir(path))
	if _, err := s.Stop(ctx, "carried"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.run, "carriers")); len(ents) != 0 {
		t.Fatalf("%d carrier directories left after stop", len(ents))
	}
}

func waitGone(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		sleepBriefly()
	}
	t.Fatalf("%s still exists", path)
}

func TestOversizeRefusedAtApply(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	secret := "hunter2-" + strings.Repeat("x", 200<<10)

	arg := shSpec("longarg", "exec sleep 100")
	arg.Command = append(arg.Command, secret)
	_, err := s.Apply(ctx, arg, ApplyOptions{Start: true})
	if !errors.Is(err, errdefs.ErrArgumentTooLong) || !strings.Contains(err.Error(), "argument 3") {
		t.Fatalf("Put: %v, want argument_too_long naming argument 3", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatal("the error holds the value")
	}

	env := shSpec("bigenv", "exec sleep 100")
	env.SecretEnv = map[string]string{}
	for _, k := range []string{"CODEFLY__A", "CODEFLY__B", "CODEFLY__C", "CODEFLY__D", "CODEFLY__E",
		"CODEFLY__F", "CODEFLY__G", "CODEFLY__H", "CODEFLY__I", "CODEFLY__J",
		"CODEFLY__K", "CODEFLY__L", "CODEFLY__M", "CODEFLY__N", "CODEFLY__O", "CODEFLY__P", "CODEFLY__Q"} {
		env.SecretEnv[k] = "hunter2-" + strings.Repeat("y", 32<<10-8) // 32 KiB each: inline
	}
	_, err = s.Apply(ctx, env, ApplyOptions{Start: true})
	if !errors.Is(err, errdefs.ErrEnvironmentTooLarge) || !strings.Contains(err.Error(), "CODEFLY__") {
		t.Fatalf("Put: %v, want environment_too_large naming keys", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatal("the error holds the value")
	}
	if list := s.List(ctx); len(list) != 0 {
		t.Fatalf("a refused spec was kept: %d workloads", len(list))
	}
}

func TestOrphanCarriersAreSwept(t *testing.T) {
	d := newDirs(t)
	s := open(t, d, false)
	w := shSpec("keeper", "exec sleep 100")
	w.Env = map[string]string{"CODEFLY__BIG": strings.Repeat("k", 40<<10)}
	got, err := s.Apply(context.Background(), w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	shut(s)
	stray := filepath.Join(d.run, "carriers", "gone.0123456789abcdef")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	live := filepath.Dir(envOf(t, got.PID)["CODEFLY__FILE__BIG"])

	s = open(t, d, true)
	defer shut(s)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("a carrier directory no run owns survived the sweep")
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the adopted run's carriers were swept: %v", err)
	}
}

func TestArgMaxFollowsTheStackLimit(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	// Ten values just under the file threshold: 320 KiB inline, over the
	// 256 KiB a 1 MiB stack allows, well under the 2 MiB of an 8 MiB one.
	w := shSpec("wide", "exec sleep 100")
	w.Env = map[string]string{}
	for i := 0; i < 10; i++ {
		w.Env["WIDE_"+itoa(i)] = strings.Repeat("w", 32<<10)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &old); err != nil {
		t.Fatal(err)
	}
	low := syscall.Rlimit{Cur: 1 << 20, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &low); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if rerr := syscall.Setrlimit(syscall.RLIMIT_STACK, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, errdefs.ErrEnvironmentTooLarge) || !strings.Contains(err.Error(), "ARG_MAX") || !strings.Contains(err.Error(), "WIDE_") {
		t.Fatalf("with a 1 MiB stack: %v, want environment_too_large naming ARG_MAX and the keys", err)
	}
	if old.Cur < 8<<20 {
		t.Skipf("the stack limit here is %d; the second half needs 8 MiB", old.Cur)
	}
	got, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if err != nil || got.State != "running" {
		t.Fatalf("with the default stack: %v (%+v)", err, got)
	}
}

func TestCarrierDirectoryThatCannotBeWritten(t *testing.T) {
	d := newDirs(t)
	s := open(t, d, true)
	defer shut(s)
	// A file where the carrier root should be: even root cannot create a
	// directory under it.
	root := filepath.Join(d.run, "carriers")
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := shSpec("blocked", "exec sleep 100")
	w.SecretEnv = map[string]string{"CODEFLY__BIG": "hunter2-" + strings.Repeat("b", 40<<10)}
	w.Restart.MaxRestarts = 1
	if _, err := s.Apply(context.Background(), w, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, s, "blocked", "failed")
	if !strings.Contains(got.LastError, "carrier") || strings.Contains(got.LastError, "hunter2") {
		t.Fatalf("last error %q: want the carrier failure, never the value", got.LastError)
	}
	if got.PID != 0 {
		t.Fatal("a run started without its carriers")
	}
}
