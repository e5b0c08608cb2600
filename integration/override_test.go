package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestUpOverrideFile: `flyd up -f base -f override` with flyd's own files
// runs the workload as the override changes it, as compose merges an
// override file: its command replaced, its env merged key by key. The
// running process says so (/proc/PID/cmdline and environ), and flyd
// config prints the same.
func TestUpOverrideFile(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	d := startDaemon(t)
	base := d.writeSpec(t, "base.yaml", `name: app
command: ["@PROG@", serve, "127.0.0.1:0", base]
env: {LEVEL: info, KEEP: base}
restart: {policy: always}
`)
	if err := os.MkdirAll(filepath.Join(d.dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	over := d.writeSpec(t, filepath.Join("dev", "override.yaml"), `name: app
command: ["@PROG@", env]
env: {LEVEL: debug, ADDED: yes}
`)
	cfg := d.mustCLI(t, "config", "-p", "ov", "-f", base, "-f", over)
	for _, want := range []string{"- env\n", "LEVEL: debug", "KEEP: base", "ADDED: yes"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("flyd config says\n%s\nwithout %q", cfg, want)
		}
	}
	d.mustCLI(t, "up", "-p", "ov", "-f", base, "-f", over, "--wait")
	w := d.waitWorkload(t, "ov.app", "a pid", func(w *api.Workload) bool { return w.PID > 0 })
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.PID))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); !slices.Equal(got, []string{d.prog, "env"}) {
		t.Errorf("the run's command is %q, want the override's", got)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.PID))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(environ), "\x00")
	for _, want := range []string{"LEVEL=debug", "KEEP=base", "ADDED=yes"} {
		if !slices.Contains(env, want) {
			t.Errorf("the run's environment lacks %s: %q", want, env)
		}
	}
	d.mustCLI(t, "down", "-p", "ov")
}
