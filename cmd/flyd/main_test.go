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
		{[]string{"logs", "--socket", sock}, 2, "a workload name, or --all"},
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

// TestArgumentRule: flags stand anywhere until the first "--", and nothing
// after it is ever a flag; exec's flags end at its command too.
func TestArgumentRule(t *testing.T) {
	tests := []struct {
		name    string
		command bool // parsed as exec parses: the command's flags are its own
		args    []string
		pos     string
		flags   string
		err     string
	}{
		{name: "logs", args: []string{"web", "-f", "--tail", "3", "--", "-odd-name"}, pos: "web|-odd-name", flags: "f=true tail=3"},
		{name: "logs after --", args: []string{"--tail", "1", "--", "--tail", "9", "-f"}, pos: "--tail|9|-f", flags: "f=false tail=1"},
		{name: "apply", args: []string{"-f", "web.yaml", "--", "--force"}, pos: "--force", flags: "f=web.yaml force=false"},
		{name: "apply flag after name", args: []string{"web", "--force"}, pos: "web", flags: "force=true"},
		{name: "unknown flag", args: []string{"web", "-x"}, err: "flag provided but not defined: -x"},
		{name: "exec pgbench", command: true, args: []string{"--network", "ci-1", "--", "pgbench", "-i", "-h", "127.0.0.1"}, pos: "pgbench|-i|-h|127.0.0.1", flags: "network=ci-1"},
		{name: "exec sh -c", command: true, args: []string{"--network", "ci-1", "--", "sh", "-c", "echo hi"}, pos: "sh|-c|echo hi", flags: "network=ci-1"},
		{name: "exec a flag of ours", command: true, args: []string{"--network", "ci-1", "--", "readlink", "-network", "ci-2", "/proc/self/ns/net"}, pos: "readlink|-network|ci-2|/proc/self/ns/net", flags: "network=ci-1"},
		{name: "exec -json", command: true, args: []string{"--network", "ci-1", "--", "echo", "-json", "hi"}, pos: "echo|-json|hi", flags: "network=ci-1 json=false"},
		{name: "exec without --", command: true, args: []string{"--network", "ci-1", "echo", "-json", "--", "hi"}, pos: "echo|-json|--|hi", flags: "network=ci-1 json=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cli{name: "test"}
			fs := c.flags()
			fs.Bool("f", false, "")
			fs.Int("tail", -1, "")
			fs.Bool("force", false, "")
			fs.String("network", "", "")
			parse := c.parse
			if tt.command {
				parse = c.parseCommand
			}
			if strings.HasPrefix(tt.name, "apply") {
				fs = c.flags()
				fs.String("f", "", "")
				fs.Bool("force", false, "")
			}
			pos, err := parse(fs, tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(pos, "|"); got != tt.pos {
				t.Errorf("positional %q, want %q", got, tt.pos)
			}
			for _, kv := range strings.Fields(tt.flags) {
				k, v, _ := strings.Cut(kv, "=")
				if got := fs.Lookup(k).Value.String(); got != v {
					t.Errorf("flag %s = %q, want %q", k, got, v)
				}
			}
		})
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
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp", "--mode", "host"}, "56960\n"},
		{[]string{"port", "hash", "--workspace", "demo", "--module", "store", "--service", "postgres", "--endpoint", "tcp", "--mode", "container"}, "47570\n"},
	} {
		var out, errb bytes.Buffer
		// No daemon is reachable on this socket: the command must not need one.
		args := append(tt.args, "--socket", filepath.Join(t.TempDir(), "none.sock"))
		if code := run(args, &out, &errb); code != 0 || out.String() != tt.want {
			t.Errorf("flyd %q: exit %d, %q %q; want %q", tt.args, code, out.String(), errb.String(), tt.want)
		}
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
		code := run(append(serve, tt.args...), &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("flyd registry serve %q: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.stderr)
		}
	}
}
