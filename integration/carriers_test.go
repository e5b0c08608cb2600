package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestFileCarriers: a value too large for the environment reaches the
// workload as a file only it can read, which goes away with the run; what
// the kernel would refuse at exec is refused at apply.
func TestFileCarriers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	b := make([]byte, 20<<10)
	_, _ = rand.Read(b)
	secret := hex.EncodeToString(b) // 40 KiB: over the 32 KiB threshold
	javaOpts := strings.Repeat("-Dflyd.x=1 ", 4<<10)

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "big.yaml", `
name: big
command: ["@PROG@", "env"]
user: nobody
secret_env: {CODEFLY__BIG_SECRET: `+secret+`}
env: {JAVA_OPTS: `+javaOpts+`}
health: {exec: ["sh", "-c", "test \"$(wc -c < \"$CODEFLY__FILE__BIG_SECRET\")\" -eq 40960"], interval: 200ms}
`))
	_, env := workloadEnv(t, d, "big")
	if _, inline := env["CODEFLY__BIG_SECRET"]; inline {
		t.Error("CODEFLY__BIG_SECRET is inline in the environment, want it delivered by file")
	}
	// A variable of the program's own is read as it is: inline, whatever
	// its size (up to the kernel's limit for one string).
	if env["JAVA_OPTS"] != strings.TrimSpace(javaOpts) && env["JAVA_OPTS"] != javaOpts || env["CODEFLY__FILE__JAVA_OPTS"] != "" {
		t.Errorf("JAVA_OPTS: %d bytes inline, by file %q; want all %d inline", len(env["JAVA_OPTS"]), env["CODEFLY__FILE__JAVA_OPTS"], len(javaOpts))
	}
	path := env["CODEFLY__FILE__BIG_SECRET"]
	if !filepath.IsAbs(path) {
		t.Fatalf("CODEFLY__FILE__BIG_SECRET=%q, want an absolute path", path)
	}
	// The exec check is given what the run is given, the file too.
	if w := d.waitWorkload(t, "big", "healthy", func(w *api.Workload) bool { return w.Healthy != nil && *w.Healthy }); w.Healthy == nil {
		t.Error("the exec check was not healthy")
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != secret {
		t.Errorf("carrier file %s: %v; content matches: %v", path, err, string(got) == secret)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != mode || st.Uid != 65534 {
			t.Errorf("%s: mode %v owner %d, want %v owned by nobody", p, fi.Mode().Perm(), st.Uid, mode)
		}
	}
	for _, text := range []string{d.mustCLI(t, "inspect", "--json", "big"), d.log(), d.logs(t, "big")} {
		if strings.Contains(text, secret) {
			t.Errorf("the secret leaked into:\n%.300s...", text)
		}
	}

	d.mustCLI(t, "stop", "big")
	eventually(t, "the carrier directory removed", func() error {
		if _, err := os.Stat(filepath.Dir(path)); err == nil {
			return fmt.Errorf("%s still exists", filepath.Dir(path))
		}
		return nil
	})

	// MAX_ARG_STRLEN: refused before anything runs, naming the argument,
	// never quoting it.
	long := strings.Repeat("a", 130<<10)
	file := d.writeSpec(t, "long.yaml", "name: long\ncommand: [\"@PROG@\", \""+long+"\"]\n")
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
	if code != 1 || !strings.Contains(errOut, "argument_too_long") || !strings.Contains(errOut, "argument 1") || strings.Contains(errOut, long[:100]) {
		t.Errorf("a 130 KiB argument: exit %d, stderr %.300q; want 1, argument_too_long naming argument 1", code, errOut)
	}
}
