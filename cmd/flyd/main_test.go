package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExitCodes(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "usage"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"logs", "--socket", sock}, 2, "one workload name"},
		{[]string{"stop", "--socket", sock}, 2, "--all"},
		{[]string{"apply", "--socket", sock}, 2, "-f is required"},
		{[]string{"ps", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"daemon", "--log-max-size", "lots"}, 2, "--log-max-size"},
		{[]string{"ps", "--socket", sock}, 1, "no flyd daemon answers on " + sock},
		{[]string{"version"}, 0, ""},
		{[]string{"help"}, 0, "commands:"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd %q: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.stderr)
		}
	}
}

func TestFlagsAnywhereAmongArguments(t *testing.T) {
	c := &cli{name: "logs"}
	fs := c.flags()
	follow := fs.Bool("f", false, "")
	tail := fs.Int("tail", -1, "")
	pos, err := c.parse(fs, []string{"web", "-f", "--tail", "3", "--", "-odd-name"})
	if err != nil {
		t.Fatal(err)
	}
	if !*follow || *tail != 3 || strings.Join(pos, " ") != "web -odd-name" {
		t.Fatalf("follow %v tail %d pos %q", *follow, *tail, pos)
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flyd.yaml")
	if err := os.WriteFile(path, []byte("state-dir: /srv/flyd\nrun-dir: /tmp/r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg daemonConfig
	fs := daemonFlags(&cfg)
	if err := fs.Parse([]string{"--config", path, "--run-dir", "/cli/wins"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if cfg.stateDir != "/srv/flyd" || cfg.runDir != "/cli/wins" {
		t.Fatalf("state %q run %q", cfg.stateDir, cfg.runDir)
	}

	if err := os.WriteFile(path, []byte("stat-dir: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs = daemonFlags(&cfg)
	_ = fs.Parse([]string{"--config", path})
	if err := applyConfigFile(fs, path); err == nil || !strings.Contains(err.Error(), `"stat-dir"`) {
		t.Fatalf("unknown key: %v", err)
	}

	// The default path may be absent; a path named on the command line may not.
	fs = daemonFlags(&cfg)
	_ = fs.Parse(nil)
	if err := applyConfigFile(fs, filepath.Join(dir, "absent.yaml")); err != nil {
		t.Fatalf("absent default config: %v", err)
	}
	fs = daemonFlags(&cfg)
	_ = fs.Parse([]string{"--config", filepath.Join(dir, "absent.yaml")})
	if err := applyConfigFile(fs, filepath.Join(dir, "absent.yaml")); err == nil {
		t.Fatal("an absent config named explicitly must be an error")
	}
}

func TestNotify(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", addr)
	notify("READY=1")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func TestPortHashOffline(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp"}, "56960\n"},
		{[]string{"port", "hash", "--workspace", "demo", "--module", "api", "--service", "server", "--endpoint", "grpc", "--api", "grpc"}, "54953\n"},
		{[]string{"port", "hash", "--workspace", "acme", "--module", "web", "--service", "frontend", "--endpoint", "rest", "--api", "rest"}, "2032\n"},
	} {
		var out, errb bytes.Buffer
		// No daemon is reachable on this socket: the command must not need one.
		args := append(tt.args, "--socket", filepath.Join(t.TempDir(), "none.sock"))
		if code := run(args, &out, &errb); code != 0 || out.String() != tt.want {
			t.Errorf("flyd %q: exit %d, %q %q; want %q", tt.args, code, out.String(), errb.String(), tt.want)
		}
	}
}
