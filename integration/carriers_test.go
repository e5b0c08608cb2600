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

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "big.yaml", `
name: big
command: ["@PROG@", "env"]
user: nobody
secret_env: {BIG_SECRET: `+secret+`}
`))
	_, env := workloadEnv(t, d, "big")
	if _, inline := env["BIG_SECRET"]; inline {
		t.Error("BIG_SECRET is inline in the environment, want it delivered by file")
	}
	path := env["CODEFLY__FILE__BIG_SECRET"]
	if !filepath.IsAbs(path) {
		t.Fatalf("CODEFLY__FILE__BIG_SECRET=%q, want an absolute path", path)
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
