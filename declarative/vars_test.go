package declarative

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// scanOf scans dir and returns each file's error text ("" when read) and
// workloads' env by file.
func scanOf(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	files, err := scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileState{}
	for _, f := range files {
		out[f.name] = f
	}
	return out
}

func writeIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScanVariables: the directory's variables are its .env's, never the
// daemon's environment; an unset one without a default is a problem (no
// one reads a warning there); env_file names a NAME.env beside the file.
func TestScanVariables(t *testing.T) {
	testenv.RequireRoot(t, "the workloads directory is trusted only when root's")
	t.Setenv("FLYD_TEST_DAEMON_VAR", "from-the-daemon")
	dir := t.TempDir()
	writeIn(t, dir, ".env", "TAG=v2\n")
	writeIn(t, dir, "app.env", "FROM_FILE=yes\nTAG=file\n")
	writeIn(t, dir, "app.yaml", "name: app\ncommand: [/bin/app, \"${TAG}\", \"${FLYD_TEST_DAEMON_VAR:-default}\", \"$$x\", \"${PORT_HTTP}\"]\n"+
		"env: {TAG: \"${TAG}\"}\nenv_file: app.env\nendpoints: [{name: http, port: ephemeral}]\n")
	writeIn(t, dir, "unset.yaml", "name: unset\ncommand: [/bin/app, \"${FLYD_TEST_DAEMON_VAR}\"]\n")
	writeIn(t, dir, "away.yaml", "name: away\ncommand: [/bin/app]\nenv_file: ../elsewhere.env\n")
	writeIn(t, dir, "odd.yaml", "name: odd\ncommand: [/bin/app]\nenv_file: odd.txt\n")
	writeIn(t, dir, "missing.yaml", "name: missing\ncommand: [/bin/app]\nenv_file: gone.env\n")
	files := scanOf(t, dir)
	app := files["app.yaml"]
	if app.err != nil || len(app.ws) != 1 {
		t.Fatalf("app.yaml: %v", app.err)
	}
	w := app.ws[0]
	if want := []string{"/bin/app", "v2", "default", "$x", "${PORT_HTTP}"}; !reflect.DeepEqual(w.Command, want) {
		t.Errorf("command %q, want %q", w.Command, want)
	}
	if want := map[string]string{"TAG": "v2", "FROM_FILE": "yes"}; !reflect.DeepEqual(w.Env, want) || w.EnvFile != nil {
		t.Errorf("env %q env_file %q, want %q", w.Env, w.EnvFile, want)
	}
	for name, want := range map[string]string{
		"unset.yaml":   filepath.Join(dir, "unset.yaml") + ": line 2: command[1]: variable FLYD_TEST_DAEMON_VAR is not set",
		"away.yaml":    "workload away: env_file: ../elsewhere.env: in the workloads directory, env_file names a NAME.env file of the directory itself",
		"odd.yaml":     "env_file: odd.txt: in the workloads directory",
		"missing.yaml": "workload missing: env_file: gone.env: no such file in the workloads directory",
	} {
		if f := files[name]; f.err == nil || !strings.Contains(f.err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, f.err, want)
		}
	}
}

// TestScanRefusesUntrustedEnv: a .env or env_file someone else could have
// written is never read: with such a .env every file is a problem, and
// keeps its workloads as they were.
func TestScanRefusesUntrustedEnv(t *testing.T) {
	testenv.RequireRoot(t, "files are given to another user")
	dir := t.TempDir()
	writeIn(t, dir, "a.yaml", "name: a\ncommand: [/bin/a]\n")
	writeIn(t, dir, "b.yaml", "name: b\ncommand: [/bin/b]\nenv_file: theirs.env\n")
	if err := os.Chown(writeIn(t, dir, "theirs.env", "X=1\n"), 65534, -1); err != nil {
		t.Fatal(err)
	}
	files := scanOf(t, dir)
	if f := files["a.yaml"]; f.err != nil {
		t.Errorf("a.yaml: %v", f.err)
	}
	if f := files["b.yaml"]; f.err == nil || !strings.Contains(f.err.Error(), "owned by uid 65534") {
		t.Errorf("b.yaml: %v, want its env_file refused", f.err)
	}
	if err := os.Chmod(writeIn(t, dir, ".env", "X=1\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	files = scanOf(t, dir)
	if f := files["a.yaml"]; f.err == nil || !strings.Contains(f.err.Error(), filepath.Join(dir, ".env")+" is writable by group or others") || f.ws != nil {
		t.Errorf("a.yaml: %v, want the .env refused", f.err)
	}
	if f := files["b.yaml"]; f.err == nil || f.ws != nil {
		t.Errorf("b.yaml: %v, want a problem", f.err)
	}
}

// TestScanLeavesOutProfiles: the directory asks for no profile; a workload
// left in that needs one left out makes its file a problem, across files.
func TestScanLeavesOutProfiles(t *testing.T) {
	testenv.RequireRoot(t, "the workloads directory is trusted only when root's")
	dir := t.TempDir()
	writeIn(t, dir, "a.yaml", "- {name: a, command: [/bin/a]}\n- {name: dbg, command: [/bin/dbg], profiles: [debug]}\n")
	writeIn(t, dir, "b.yaml", "name: b\ncommand: [/bin/b]\nuses: [dbg]\n")
	writeIn(t, dir, "c.yaml", "name: c\ncommand: [/bin/c]\nprofiles: [ci]\n")
	files := scanOf(t, dir)
	if f := files["a.yaml"]; f.err != nil || len(f.ws) != 1 || f.ws[0].Name != "a" {
		t.Errorf("a.yaml: %v, %d workloads; want a alone", f.err, len(f.ws))
	}
	if f := files["b.yaml"]; f.err == nil || !strings.Contains(f.err.Error(), "workload b needs dbg (after or uses), which is left out: none of its profiles (debug) is asked for (the workloads directory asks for no profile)") {
		t.Errorf("b.yaml: %v", f.err)
	}
	if f := files["c.yaml"]; f.err != nil || len(f.ws) != 0 {
		t.Errorf("c.yaml: %v, %d workloads; want none, no problem", f.err, len(f.ws))
	}
}

// TestWatchEnvFiles: a change of the .env or of a NAME.env is a change of
// the files that use them, applied as one.
func TestWatchEnvFiles(t *testing.T) {
	testenv.RequireRoot(t, "the workloads directory is trusted only when root's")
	dir := t.TempDir()
	writeIn(t, dir, ".env", "V=v1\n")
	writeIn(t, dir, "app.env", "E=e1\n")
	writeIn(t, dir, "a.yaml", "name: x\ncommand: [\"/bin/${V}\", \"${E:-none}\"]\nenv_file: app.env\n")
	fake := newFakeApplier(nil)
	w := newTestWatcher(t, dir, fake)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	want := func(state string) {
		t.Helper()
		eventually(t, state, func() string {
			if got := fake.state(); got != state {
				return "state " + got
			}
			return ""
		})
	}
	want("x a.yaml /bin/v1 none")
	writeIn(t, dir, ".env", "V=v2\nE=from-dotenv\n")
	want("x a.yaml /bin/v2 from-dotenv")
	writeIn(t, dir, "app.env", "V=not-a-variable\n")
	eventually(t, "env from app.env", func() string {
		fake.mu.Lock()
		x, ok := fake.workloads["x"]
		fake.mu.Unlock()
		if !ok {
			return "x missing"
		}
		if x.spec.Env["V"] != "not-a-variable" {
			return fmt.Sprint(x.spec.Env)
		}
		return ""
	})
}
