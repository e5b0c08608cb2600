package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/flydtest"
	"github.com/flyd-dev/flyd/spec"
)

// stackDir writes one directory of a five-service stack, as a project's
// files: Debian's PostgreSQL with an init one-shot and a seed one-shot
// that writes the project's name, Redis, a Python app that reads both
// through its `uses` variables, and nginx in front of it published on a
// hashed host port. The .env beside it says where the programs are.
func stackDir(t *testing.T, d *daemon) string {
	t.Helper()
	pgBin, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(pgBin) == 0 {
		t.Skip() // postgres(t) below says why, under CI a failure
	}
	redis := need(t, "redis-server", "redis-server")
	nginx := need(t, "nginx", "nginx-light")
	need(t, "psql", "postgresql-client")
	need(t, "redis-cli", "redis-tools")
	dir := filepath.Join(d.dir, "shop")
	data := filepath.Join(d.dir, "data")
	for _, p := range []string{dir, data} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each copy's postgres makes its cluster here, as the postgres user.
	if err := os.Chmod(data, 0o1777); err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("PGBIN=%s\nREDIS=%s\nNGINX=%s\nDATA=%s\n", filepath.Dir(pgBin[0]), redis, nginx, data)
	files := map[string]string{
		".env": env,
		"app.py": `import http.server, os, subprocess
pg = os.environ["CODEFLY__ENDPOINT__STORE__PG__TCP__TCP"].rsplit(":", 1)
rd = os.environ["CODEFLY__ENDPOINT__STORE__REDIS__TCP__TCP"].rsplit(":", 1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok\n"); return
        v = subprocess.run(["psql", "-h", pg[0], "-p", pg[1], "-U", "postgres", "-Atc", "select v from t"], capture_output=True, text=True).stdout.strip()
        n = subprocess.run(["redis-cli", "-h", rd[0], "-p", rd[1], "incr", "hits"], capture_output=True, text=True).stdout.strip()
        body = ("project=%s hits=%s\n" % (v, n)).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["FLYD_PORT_HTTP"])), H).serve_forever()
`,
		"stack.yaml": `kind: network
name: net
---
name: initdb
network: net
user: postgres
command: [sh, -c, 'rm -rf "${DATA}/pg-$FLYD_PROJECT" && exec "${PGBIN}/initdb" -D "${DATA}/pg-$FLYD_PROJECT" -U postgres --auth=trust -E UTF8']
restart: {policy: never}
---
name: pg
identity: {module: store, service: pg}
network: net
user: postgres
after: ["initdb:completed"]
command: [sh, -c, 'exec "${PGBIN}/postgres" -D "${DATA}/pg-$FLYD_PROJECT" -p 5432 -c listen_addresses=127.0.0.1 -c unix_socket_directories=']
endpoints: [{name: tcp, port: 5432}]
health: {tcp: tcp, interval: 200ms}
stop: {signal: SIGINT, mode: main, timeout: 20s}
---
name: seed
network: net
uses: [pg]
command: [sh, -c, 'a=$CODEFLY__ENDPOINT__STORE__PG__TCP__TCP; psql -h $(echo $a | cut -d: -f1) -p $(echo $a | cut -d: -f2) -U postgres -v ON_ERROR_STOP=1 -c "create table t (v text)" -c "insert into t values (''$FLYD_PROJECT'')"']
restart: {policy: never}
---
name: redis
identity: {module: store, service: redis}
network: net
command: ["${REDIS}", --port, "6379", --bind, 127.0.0.1, --save, "", --appendonly, "no", --dir, /tmp]
endpoints: [{name: tcp, port: 6379}]
health: {tcp: tcp, send: "PING\r\n", expect: "+PONG", interval: 200ms}
---
name: app
network: net
uses: [pg, redis]
after: ["seed:completed"]
command: [python3, "${PWD}/app.py"]
endpoints: [{name: http, api: http}]
health: {http: {endpoint: http, path: /health}, interval: 200ms}
---
name: web
network: net
uses: [app]
command: [sh, -c, 'd="${DATA}/nginx-$FLYD_PROJECT"; mkdir -p "$d" && printf "pid %s/nginx.pid; error_log stderr; events {} http { access_log off; client_body_temp_path %s/b; proxy_temp_path %s/p; fastcgi_temp_path %s/f; uwsgi_temp_path %s/u; scgi_temp_path %s/s; server { listen 127.0.0.1:%s; location / { proxy_pass %s; } } }" "$d" "$d" "$d" "$d" "$d" "$d" "$FLYD_PORT_HTTP" "$CODEFLY__ENDPOINT__APP__APP__HTTP__HTTP" > "$d/nginx.conf" && exec "${NGINX}" -c "$d/nginx.conf" -e stderr -g "daemon off;"']
endpoints: [{name: http, api: http, publish: hashed}]
health: {tcp: http, interval: 200ms}
stop: {signal: SIGQUIT, mode: main}
`,
	}
	for name, text := range files {
		text = strings.ReplaceAll(text, "${PWD}", dir)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// published is the host port a project's workload is published on.
func published(t *testing.T, d *daemon, workload string) int {
	t.Helper()
	ps, err := d.client.Ports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Workload == workload && p.Published != 0 {
			return p.Published
		}
	}
	t.Fatalf("%s publishes nothing: %+v", workload, ps)
	return 0
}

// TestProjectsFourCopies: one directory brought up as four projects at
// once, each answering on its own published port with its own data;
// `down` of one leaves the other three serving and the host clean of it.
func TestProjectsFourCopies(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	postgres(t, d.dir) // skips, with its reason, where PostgreSQL is missing
	dir := stackDir(t, d)
	projects := []string{"cp-0", "cp-1", "cp-2", "cp-3"}
	var wg sync.WaitGroup
	for _, p := range projects {
		wg.Go(func() {
			if out, errOut, code := runCLI(t, d.socket, "up", "-p", p, "-f", dir, "--wait", "--timeout", "3m"); code != 0 {
				t.Errorf("up -p %s: exit %d\n%s%s", p, code, out, errOut)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ports := map[int]string{}
	for _, p := range projects {
		port := published(t, d, p+".web")
		if other, dup := ports[port]; dup {
			t.Errorf("%s and %s publish the same host port %d", p, other, port)
		}
		ports[port] = p
		body, err := httpGet(fmt.Sprintf("127.0.0.1:%d", port), "/")
		if err != nil || !strings.Contains(body, "project="+p+" hits=1") {
			t.Errorf("%s at %d: %q %v; want its own data", p, port, body, err)
		}
		// The published port is codefly's hash with the project as the
		// naming scope, as `flyd port hash --scope` computes it offline.
		want := strings.TrimSpace(d.mustCLI(t, "port", "hash", "--workspace", "default", "--module", "web", "--service", "web",
			"--endpoint", "http", "--api", "http", "--scope", p))
		if fmt.Sprint(port) != want {
			t.Errorf("%s publishes %d; codefly's hash with scope %s is %s", p, port, p, want)
		}
	}

	out := d.mustCLI(t, "down", "-p", "cp-0")
	for _, want := range []string{"cp-0.web removed", "cp-0.pg removed", "network cp-0.net removed"} {
		if !strings.Contains(out, want) {
			t.Errorf("down -p cp-0 said %q; want %q in it", out, want)
		}
	}
	ws, _ := d.client.List(context.Background())
	for _, w := range ws {
		if spec.ProjectOf(w.Name) == "cp-0" {
			t.Errorf("%s is left after down", w.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(d.runDir, "netns", "cp-0.net")); !os.IsNotExist(err) {
		t.Errorf("cp-0's network namespace is left: %v", err)
	}
	for port, p := range ports {
		body, err := httpGet(fmt.Sprintf("127.0.0.1:%d", port), "/")
		switch {
		case p == "cp-0" && err == nil:
			t.Errorf("cp-0's port %d still answers: %q", port, body)
		case p != "cp-0" && (err != nil || !strings.Contains(body, "project="+p+" hits=2")):
			t.Errorf("%s after cp-0's down: %q %v; want it untouched", p, body, err)
		}
	}
	if _, errOut, code := runCLI(t, d.socket, "down", "-p", "cp-0"); code != 1 || !strings.Contains(errOut, `no project named "cp-0"`) {
		t.Errorf("a second down: exit %d, %s; want not found, naming it", code, errOut)
	}
}

// smallStack is a project of one redis in a network of its own.
func smallStack(t *testing.T, d *daemon) string {
	t.Helper()
	redis := need(t, "redis-server", "redis-server")
	need(t, "redis-cli", "redis-tools")
	return d.writeSpec(t, "small.yaml", fmt.Sprintf(`kind: network
name: net
---
name: cache
network: net
command: [%q, --port, "6379", --bind, 127.0.0.1, --save, "", --appendonly, "no", --dir, /tmp]
endpoints: [{name: tcp, port: 6379}]
health: {tcp: tcp, send: "PING\r\n", expect: "+PONG", interval: 100ms}
`, redis))
}

// TestRunExitsAsItsCommand: `flyd run` brings the project up, runs the
// command in its network with the variables of its endpoints, exits as
// the command did, and takes the project down; a stack that does not come
// up fails naming it and is still taken down.
func TestRunExitsAsItsCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := smallStack(t, d)
	ping := `a=$CODEFLY__ENDPOINT__CACHE__CACHE__TCP__TCP; redis-cli -h "${a%:*}" -p "${a##*:}" ping`
	out, errOut, code := runCLI(t, d.socket, "run", "-p", "r0", "-f", file, "--", "sh", "-c", ping)
	if code != 0 || !strings.Contains(out, "PONG") {
		t.Errorf("run of a ping: exit %d, %q %s; want 0 and PONG", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, d.socket, "run", "-p", "r3", "-f", file, "--", "sh", "-c", "echo failing; exit 3"); code != 3 {
		t.Errorf("run of exit 3: exit %d, %s; want 3", code, errOut)
	}
	broken := d.writeSpec(t, "broken.yaml", "name: bad\ncommand: [sh, -c, \"echo cannot start >&2; exit 1\"]\nrestart: {policy: never}\n")
	if _, errOut, code := runCLI(t, d.socket, "run", "-p", "rb", "-f", broken, "--", "true"); code != 1 || !strings.Contains(errOut, "rb.bad") || !strings.Contains(errOut, "cannot start") {
		t.Errorf("run of a stack that fails: exit %d, %s; want 1 naming rb.bad with its log", code, errOut)
	}
	assertNoProjects(t, d, "r0", "r3", "rb")
}

// assertNoProjects checks that nothing of the projects is left: no
// workload, no network.
func assertNoProjects(t *testing.T, d *daemon, projects ...string) {
	t.Helper()
	ws, err := d.client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := api.DocumentsOf[api.Network](context.Background(), d.client, spec.KindNetwork)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range projects {
		for _, w := range ws {
			if spec.ProjectOf(w.Name) == p {
				t.Errorf("workload %s is left", w.Name)
			}
		}
		for _, n := range ns {
			if spec.ProjectOf(n.Name) == p {
				t.Errorf("network %s is left", n.Name)
			}
		}
	}
}

// TestRunInterrupted: SIGINT to `flyd run` in the middle of its command
// takes the project down, its command and network with it.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := smallStack(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := cliCmd(ctx, d.socket, "run", "-p", "ri", "-f", file, "--", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitRunCommand(t, d, "ri")
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err == nil {
		t.Error("flyd run exited 0 after SIGINT")
	}
	assertNoProjects(t, d, "ri")
}

// waitRunCommand waits until the command of a `flyd run` of project runs.
func waitRunCommand(t *testing.T, d *daemon, project string) {
	t.Helper()
	eventually(t, "the command running", func() error {
		ws, err := d.client.ListProject(context.Background(), project)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if strings.HasPrefix(w.Name, project+".run-") && w.State == api.StateRunning {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
}

// TestUpRemovesWhatTheFilesNoLongerHold: up again with a file less
// removes its workload, and says so; a file of another project is
// refused naming the file; a name is the project's own.
func TestUpRemovesWhatTheFilesNoLongerHold(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	two := d.writeSpec(t, "two.yaml", "name: a\ncommand: [\"@PROG@\", signals]\n---\nname: b\ncommand: [\"@PROG@\", signals]\nafter: [a]\n")
	one := d.writeSpec(t, "one.yaml", "name: a\ncommand: [\"@PROG@\", signals]\n")
	d.mustCLI(t, "up", "-p", "u1", "-f", two, "--wait")
	d.mustCLI(t, "up", "-p", "u2", "-f", two, "--wait")
	if out := d.mustCLI(t, "up", "-p", "u1", "-f", one); !strings.Contains(out, "u1.b removed") {
		t.Errorf("up with b gone said %q; want u1.b removed", out)
	}
	if _, err := d.client.Get(context.Background(), "u1.b"); err == nil {
		t.Error("u1.b is left")
	}
	if _, err := d.client.Get(context.Background(), "u2.b"); err != nil {
		t.Errorf("u2.b went with u1's: %v", err)
	}
	other := d.writeSpec(t, "other.yaml", "name: c\nproject: elsewhere\ncommand: [\"@PROG@\", signals]\n")
	if _, errOut, code := runCLI(t, d.socket, "up", "-p", "u1", "-f", other); code != 1 || !strings.Contains(errOut, "other.yaml") || !strings.Contains(errOut, `project "elsewhere"`) {
		t.Errorf("up of a file of another project: exit %d, %s; want refused naming the file", code, errOut)
	}
	// -p scopes names: stop, logs and rm of one project leave the other's.
	d.mustCLI(t, "-p", "u2", "stop", "a")
	if w := d.get(t, "u1.a"); w.State != api.StateRunning {
		t.Errorf("u1.a is %s after -p u2 stop a", w.State)
	}
	d.mustCLI(t, "rm", "-p", "u2", "--all")
	assertNoProjects(t, d, "u2")
	if w := d.get(t, "u1.a"); w.State != api.StateRunning {
		t.Errorf("u1.a is %s after rm -p u2 --all", w.State)
	}
	d.mustCLI(t, "down", "-p", "u1")
	assertNoProjects(t, d, "u1")
}

// TestGoPackageFromParallelTests: the flydtest package gives parallel
// tests stacks of their own, reads their addresses and runs in them, and
// leaves nothing once they end.
func TestGoPackageFromParallelTests(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	redis := need(t, "redis-server", "redis-server")
	need(t, "redis-cli", "redis-tools")
	cache := func() *spec.Workload {
		return &spec.Workload{Name: "cache", Network: "net", Identity: &spec.Identity{Module: "store", Service: "cache"},
			Command:   []string{redis, "--port", "6379", "--bind", "127.0.0.1", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/tmp"},
			Endpoints: []spec.Endpoint{{Name: "tcp", Port: spec.Port{Mode: spec.PortFixed, Number: 6379}, Publish: spec.Port{Mode: spec.PortEphemeral}}},
			Health:    &spec.Health{TCP: "tcp", Send: "PING\r\n", Expect: "+PONG"}}
	}
	var names sync.Map
	t.Run("group", func(t *testing.T) {
		for i := range 2 {
			t.Run(fmt.Sprint("copy", i), func(t *testing.T) {
				t.Parallel()
				p := flydtest.Start(t, flydtest.Docs(&spec.Network{Kind: spec.KindNetwork, Name: "net"}, cache()), flydtest.Socket(d.socket))
				names.Store(p.Name, true)
				addr := p.Addr("store/cache/tcp")
				host, port, _ := strings.Cut(addr, ":")
				if out, err := exec.Command("redis-cli", "-h", host, "-p", port, "set", "copy", fmt.Sprint(i)).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "OK" {
					t.Fatalf("redis-cli at %s: %v %s", addr, err, out)
				}
				if env := p.Env(); env["CODEFLY__ENDPOINT__STORE__CACHE__TCP__TCP"] != addr {
					t.Errorf("Env = %v; want the cache at %s", env, addr)
				}
				out, code, err := p.Run("sh", "-c", `a=$CODEFLY__ENDPOINT__STORE__CACHE__TCP__TCP; redis-cli -h "${a%:*}" -p "${a##*:}" get copy`)
				if err != nil || code != 0 || strings.TrimSpace(out) != fmt.Sprint(i) {
					t.Errorf("Run: %q, exit %d, %v; want this copy's own %d", out, code, err, i)
				}
			})
		}
	})
	n := 0
	names.Range(func(k, _ any) bool {
		n++
		assertNoProjects(t, d, k.(string))
		return true
	})
	if n != 2 {
		t.Errorf("%d projects started; want 2 of their own", n)
	}
}
