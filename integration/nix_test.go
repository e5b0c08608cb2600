package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver/nix/nixtest"
)

// TestNixWorkloads: a devShell workload gets the shell's variables and its
// programs on PATH, is the program itself (no nix parent), and leaves
// nothing when stopped; a package workload runs the package's program; a
// flake that does not exist fails with a clear error.
func TestNixWorkloads(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	d := startDaemon(t)
	flake := filepath.Join(d.dir, "flake")
	nixtest.WriteFlake(t, flake, "hello-from-flake")

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "shell.yaml", fmt.Sprintf(`
name: shell
kind: nix
nix: {flake: "path:%s", shell: default}
command: ["sleep", "100"]
`, flake)))
	w := d.waitState(t, "shell", api.StateRunning)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.PID))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if vars["GREETING"] != "hello-from-flake" || vars["CODEFLY__RUNTIME_CONTEXT"] != "nix" {
		t.Errorf("GREETING=%q CODEFLY__RUNTIME_CONTEXT=%q", vars["GREETING"], vars["CODEFLY__RUNTIME_CONTEXT"])
	}
	if !strings.HasPrefix(vars["PATH"], "/nix/store/") {
		t.Errorf("the devShell PATH does not come first: %s", vars["PATH"])
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", w.PID)); !strings.HasPrefix(exe, "/nix/store/") {
		t.Errorf("the supervised pid runs %s, not the flake's program", exe)
	}
	d.mustCLI(t, "stop", "shell")
	if alive(w.PID) {
		t.Fatal("the program outlived stop")
	}

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "pkg.yaml", fmt.Sprintf(`
name: pkg
kind: nix
nix: {package: "path:%s#hello"}
command: ["hello"]
restart: {policy: never}
`, flake)))
	d.waitLog(t, "pkg", "hello-from-package")

	// A user's /dev/stdout and /dev/stderr open, as a native workload's.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "user.yaml", fmt.Sprintf(`
name: user
kind: nix
user: nobody
nix: {flake: "path:%s", shell: default}
command: [/bin/sh, -c, "echo nix-stdout > /dev/stdout && echo nix-stderr > /dev/stderr && exec sleep 100"]
`, flake)))
	d.waitLog(t, "user", "nix-stdout\n")
	d.waitLog(t, "user", "nix-stderr\n")
	d.mustCLI(t, "stop", "user")

	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "missing.yaml", `
name: missing
kind: nix
nix: {flake: "path:/nonexistent/flake"}
command: ["hello"]
`))
	if code != 1 || !strings.Contains(errOut, "/nonexistent/flake") {
		t.Fatalf("a missing flake: exit %d, %s", code, errOut)
	}
}
