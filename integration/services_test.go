package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// need finds a program of a Debian package the test drives.
func need(t *testing.T, program, pkg string) string {
	t.Helper()
	for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
		if p := filepath.Join(dir, program); fileExists(p) {
			return p
		}
	}
	testenv.Skip(t, fmt.Sprintf("%s is not installed (Debian package %s)", program, pkg))
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func healthy(want bool) func(w *api.Workload) bool {
	return func(w *api.Workload) bool { return w.Healthy != nil && *w.Healthy == want }
}

// TestRedisConversationCheck: a tcp check that says PING and wants +PONG
// tells a redis that accepts but does not serve (its clients paused, or
// the process stopped) from one that serves, where a bare connect cannot.
func TestRedisConversationCheck(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	server := need(t, "redis-server", "redis-server")
	cli := need(t, "redis-cli", "redis-tools")
	as := ""
	if _, err := user.Lookup("redis"); err == nil {
		as = "user: redis"
	}
	port := freePort(t)
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "redis.yaml", fmt.Sprintf(`
name: redis
command: [%q, "--port", "${PORT_REDIS}", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", "/tmp"]
%s
endpoints: [{name: redis, port: %d}]
health: {tcp: redis, send: "PING\r\n", expect: "+PONG", interval: 100ms, timeout: 300ms, failures: 2}
`, server, as, port)))
	d.waitWorkload(t, "redis", "healthy", healthy(true))
	rcli := func(args ...string) string {
		out, err := exec.Command(cli, append([]string{"-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := rcli("SET", "k", "v"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	// Paused clients: the port accepts, PING has no answer.
	rcli("CLIENT", "PAUSE", "3000", "ALL")
	d.waitWorkload(t, "redis", "unhealthy while its clients are paused", healthy(false))
	d.waitWorkload(t, "redis", "healthy once the pause ends", healthy(true))
	d.mustCLI(t, "signal", "redis", "STOP")
	d.waitWorkload(t, "redis", "unhealthy while stopped", healthy(false))
	d.mustCLI(t, "signal", "redis", "CONT")
	w := d.waitWorkload(t, "redis", "healthy once continued", healthy(true))
	if w.Restarts != 0 {
		t.Errorf("redis restarted %d times", w.Restarts)
	}
	if got := rcli("GET", "k"); got != "v" {
		t.Errorf("GET after it all: %q", got)
	}
	d.mustCLI(t, "stop", "redis")
}

// TestNginxReloads: nginx takes a new configuration on `flyd reload`
// (SIGHUP to its master alone), its pid unchanged, and serves it.
func TestNginxReloads(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	nginx := need(t, "nginx", "nginx-light")
	port := freePort(t)
	dir := filepath.Join(d.dir, "nginx")
	conf := filepath.Join(dir, "nginx.conf")
	write := func(body string) {
		t.Helper()
		text := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr;
worker_processes 2;
events {}
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:%[2]d;
		location / { return 200 "%[3]s\n"; }
	}
}
`, dir, port, body)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("first")
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "nginx.yaml", fmt.Sprintf(`
name: nginx
command: [%q, "-c", %q, "-e", "stderr", "-g", "daemon off;"]
endpoints: [{name: http, port: %d}]
health: {tcp: http, interval: 100ms}
reload: {signal: HUP}
stop: {signal: SIGQUIT, mode: main}
`, nginx, conf, port)))
	serves := func(want string) error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if got := strings.TrimSpace(string(b)); got != want {
			return fmt.Errorf("serves %q", got)
		}
		return nil
	}
	eventually(t, "nginx serving the first configuration", func() error { return serves("first") })
	before := d.waitState(t, "nginx", api.StateRunning)
	write("second")
	d.mustCLI(t, "reload", "nginx")
	eventually(t, "nginx serving the second configuration", func() error { return serves("second") })
	after := d.waitState(t, "nginx", api.StateRunning)
	if after.PID != before.PID || after.Restarts != 0 {
		t.Errorf("reload: pid %d→%d, %d restarts; want the same master, none", before.PID, after.PID, after.Restarts)
	}
	d.mustCLI(t, "stop", "nginx")
	if _, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
		t.Error("nginx still serves after stop")
	}
}
