package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestDaemonUsage: a daemon flag with a bad value is a usage error, before
// anything is opened.
func TestDaemonUsage(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Main([]string{"daemon", "--log-max-size", "lots"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--log-max-size") {
		t.Errorf("flyd daemon --log-max-size lots: exit %d, stderr %q; want 2 and the flag named", code, errb.String())
	}
}

// TestDaemonRegistryTLSUsage: the embedded registry's certificate and key
// go together, and only with the embedded registry.
func TestDaemonRegistryTLSUsage(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--registry-tls-cert", "c.pem"}, "--registry-tls-cert and --registry-tls-key go together"},
		{[]string{"--registry-tls-key", "k.pem"}, "--registry-tls-cert and --registry-tls-key go together"},
		{[]string{"--registry", "http://127.0.0.1:9", "--registry-tls-cert", "c.pem", "--registry-tls-key", "k.pem"}, "is for the embedded registry"},
	} {
		var out, errb bytes.Buffer
		home := t.TempDir()
		t.Setenv("FLYD_HOME", home)
		code := cli.Main(append([]string{"daemon"}, tt.args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd daemon %q: exit %d, stderr %q; want 2 and %q", tt.args, code, errb.String(), tt.stderr)
		}
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

// TestConfigFileTrust: the config sets the socket's group and the paths the
// daemon trusts, so a config another user could have written is refused.
func TestConfigFileTrust(t *testing.T) {
	testenv.RequireRoot(t, "the config file is given to another user")
	dir := t.TempDir()
	path := filepath.Join(dir, "flyd.yaml")
	if err := os.WriteFile(path, []byte("socket-group: users\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, -1); err != nil {
		t.Fatal(err)
	}
	var cfg daemonConfig
	fs := daemonFlags(&cfg)
	_ = fs.Parse([]string{"--config", path})
	err := applyConfigFile(fs, path)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || cfg.socketGroup != "flyd" {
		t.Fatalf("a user's config: %v, socket group %q; want refused and unread", err, cfg.socketGroup)
	}
}

// `flyd registry serve` refuses store flags that do not go together before
// it touches a key file or a port.
func TestRegistryServeStoreFlags(t *testing.T) {
	key := filepath.Join(t.TempDir(), "registry.key")
	serve := []string{"registry", "serve", "--listen", "127.0.0.1:0", "--key-file", key}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--store", "redis"}, 2, `--store "redis": memory or etcd`},
		{[]string{"--store", "etcd"}, 2, "--store etcd needs --etcd-endpoints"},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:2379"}, 2, "--etcd-endpoints is for --store etcd"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--snapshot", "s.json"}, 2, "--snapshot is for --store memory"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--reap-interval", "1s"}, 2, "etcd's lease expiry is the reaper"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--etcd-cert", "c.pem"}, 2, "--etcd-cert and --etcd-key go together"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--etcd-timeout", "0s"}, 2, "--etcd-timeout must be positive"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, 1, "give a URL, http:// or https://"},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--etcd-prefix", "flyd"}, 1, `prefix "flyd" must start with /`},
		{[]string{"--store", "etcd", "--etcd-endpoints", "http://h:1", "--etcd-cacert", "/nonexistent/ca.pem"}, 1, "--etcd-cacert"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := cli.Main(append(serve, tt.args...), &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd registry serve %q: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.stderr)
		}
	}
}
