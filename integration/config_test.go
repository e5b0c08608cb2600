package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonConfig checks the config file: its keys are the flags' names,
// flags win over it, and a file named explicitly must exist and be valid.
func TestDaemonConfig(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	if _, err := user.LookupGroup("users"); err != nil {
		t.Skipf("no group users on this host to see the config applied through --socket-group: %v", err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The file's socket-group applies; its socket is overridden by the flag
	// startDaemon passes.
	cfg := write("flyd.yaml", "socket-group: users\nsocket: "+filepath.Join(dir, "unused.sock")+"\nlog-level: debug\n")
	d := startDaemon(t, withArgs("--config", cfg))
	if fi, err := os.Stat(d.socket); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v, mode %v; want 0660 from the config's socket-group", err, fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.sock")); err == nil {
		t.Error("the config's socket was used although --socket was given")
	}
	d.terminate(t)

	for what, c := range map[string]struct{ config, want string }{
		"missing file": {filepath.Join(dir, "absent.yaml"), "absent.yaml"},
		"empty file":   {write("empty.yaml", ""), ""},
		"unknown key":  {write("unknown.yaml", "sokcet: /x\n"), `unknown key "sokcet"`},
		"bad value":    {write("bad.yaml", "stop-workloads-on-exit: maybe\n"), "stop-workloads-on-exit"},
		"malformed":    {write("malformed.yaml", "socket: [\n"), "malformed.yaml"},
	} {
		if c.want == "" {
			// A valid empty file is defaults: the daemon starts.
			d := startDaemon(t, withArgs("--config", c.config))
			d.terminate(t)
			continue
		}
		args := []string{"daemon", "--config", c.config, "--socket", filepath.Join(dir, "x.sock"),
			"--state-dir", filepath.Join(dir, "x-state"), "--run-dir", filepath.Join(dir, "x-run")}
		_, errOut, code := runCmd(t, cliCmd(t.Context(), "", args...))
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 mentioning %q", what, code, errOut, c.want)
		}
	}
	if _, errOut, code := runCmd(t, cliCmd(t.Context(), "", "daemon", "--no-such-flag")); code != 2 {
		t.Errorf("daemon --no-such-flag: exit %d, stderr %q; want 2", code, errOut)
	}
}
