package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
)

// shopCompose is a web shop's compose file as docker compose runs it,
// with x-flyd beside each image so that flyd runs the service natively
// from the host's packages: PostgreSQL (initdb on its first start, as
// the image's entrypoint does), Redis, a one-shot migration, a web app,
// workers that take jobs from Redis into PostgreSQL, nginx in front, a
// container of static files whose image is pulled from a registry, and
// a debugging service of a profile. ${…} come from .env.
const shopCompose = `name: shop
services:
  db:
    image: docker.io/library/postgres:15
    environment:
      POSTGRES_PASSWORD: ${DB_PASSWORD}
      POSTGRES_HOST_AUTH_METHOD: trust
    ports: ["5432"]
    volumes: [pgdata:/var/lib/postgresql/data]
    healthcheck:
      test: [CMD, pg_isready, -h, 127.0.0.1, -p, "5432", -U, postgres]
      interval: 200ms
      retries: 100
    stop_signal: SIGINT
    stop_grace_period: 20s
    x-flyd:
      kind: native
      user: postgres
      command: [/bin/sh, -c, 'd="${DATA}/pg-$$FLYD_NETWORK"; [ -s "$$d/PG_VERSION" ] || { ${PGBIN}/initdb -D "$$d" -U postgres --auth=trust -E UTF8 >/dev/null && echo "host all all all trust" >> "$$d/pg_hba.conf"; } || exit 1; exec ${PGBIN}/postgres -D "$$d" -p 5432 -c listen_addresses=127.0.0.1 -c unix_socket_directories=']
      stop: {signal: SIGINT, timeout: 20s, mode: main}

  redis:
    image: docker.io/library/redis:7
    ports: ["6379"]
    healthcheck:
      test: [CMD, redis-cli, -p, "6379", ping]
      interval: 200ms
      retries: 100
    x-flyd:
      kind: native
      command: [redis-server, --port, "6379", --bind, 127.0.0.1, --protected-mode, "no", --save, "", --appendonly, "no", --dir, /tmp]

  migrate:
    image: docker.io/library/postgres:15
    environment: &pg
      PGHOST: ${DB_HOST}
      PGUSER: postgres
    command: [psql, -v, ON_ERROR_STOP=1, -f, /migrations/001.sql]
    volumes: [./migrations:/migrations:ro]
    depends_on:
      db: {condition: service_healthy}
    x-flyd:
      kind: native
      command: [psql, -q, -v, ON_ERROR_STOP=1, -f, migrations/001.sql]

  web:
    image: docker.io/library/python:3.11
    command: [python3, app.py]
    working_dir: /app
    volumes: [.:/app:ro]
    environment:
      <<: *pg
      REDIS_HOST: ${REDIS_HOST}
      GREETING: ${GREETING:-hello}
    expose: ["8000"]
    healthcheck:
      test: [CMD, curl, -fsS, http://127.0.0.1:8000/healthz]
      interval: 200ms
      retries: 100
    restart: on-failure
    depends_on:
      migrate: {condition: service_completed_successfully}
      redis: {condition: service_healthy, restart: true}
    x-flyd:
      kind: native
      command: [python3, app.py]

  worker:
    image: docker.io/library/python:3.11
    command: [sh, worker.sh]
    working_dir: /app
    volumes: [.:/app:ro]
    environment:
      <<: *pg
      REDIS_HOST: ${REDIS_HOST}
    restart: on-failure
    deploy: {replicas: 1}
    depends_on:
      migrate: {condition: service_completed_successfully}
      redis: {condition: service_healthy}
    x-flyd:
      kind: native
      command: [/bin/sh, worker.sh]

  static:
    image: ${REGISTRY}/shop/static:latest
    entrypoint: [/bin/sh, -c]
    command: ['echo "static of $$GREETING" > /www/index.html || exit 1; trap "exit 0" TERM; httpd -f -p 8081 -h /www & wait']
    environment:
      GREETING: ${GREETING:-hello}
    volumes: [assets:/www]
    healthcheck:
      test: [CMD, wget, -q, -O, /dev/null, http://127.0.0.1:8081/]
      interval: 200ms
      retries: 100

  proxy:
    image: docker.io/library/nginx:1.25
    ports: ["8080"]
    volumes: [./nginx.conf:/etc/nginx/nginx.conf:ro]
    healthcheck:
      test: [CMD, curl, -fsS, http://127.0.0.1:8080/healthz]
      interval: 200ms
      retries: 100
    depends_on:
      web: {condition: service_healthy}
      static: {condition: service_healthy}
    stop_signal: SIGQUIT
    x-flyd:
      kind: native
      command: [/bin/sh, -c, 'exec nginx -c "$$(pwd)/nginx.conf" -e stderr -g "daemon off; pid ${DATA}/nginx-$$FLYD_NETWORK.pid;"']
      stop: {signal: SIGQUIT, mode: main}

  debug:
    image: docker.io/library/redis:7
    profiles: [debug]
    command: [sleep, infinity]
    x-flyd: {kind: native, command: [sleep, "600"]}

volumes:
  pgdata: {}
  assets: {}
`

// shopOverride is the override file: two workers, and the web app's
// greeting.
const shopOverride = `services:
  worker:
    deploy: {replicas: 2}
  web:
    environment:
      GREETING: from-override
`

var shopFiles = map[string]string{
	"migrations/001.sql": `create table if not exists jobs_done (job text primary key, worker text not null);
`,
	"app.py": `import http.server, os, subprocess
def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            body = b"ok\n"
        else:
            jobs = run("psql", "-Atc", "select count(*) from jobs_done")
            hits = run("redis-cli", "-h", os.environ["REDIS_HOST"], "incr", "hits")
            body = ("%s jobs=%s hits=%s\n" % (os.environ["GREETING"], jobs, hits)).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
`,
	"worker.sh": `set -e
while true; do
  job=$(redis-cli -h "$REDIS_HOST" --raw brpop jobs 0 | tail -n 1)
  psql -q -v ON_ERROR_STOP=1 -c "insert into jobs_done values ('$job', '$FLYD_WORKLOAD')"
done
`,
}

// shopDir writes the shop's files into a directory of the daemon's, for
// the programs of this host.
func shopDir(t *testing.T, d *daemon, registry string) string {
	t.Helper()
	pgBin, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(pgBin) == 0 {
		postgres(t, d.dir) // skips, saying why (under CI, fails)
	}
	need(t, "redis-server", "redis-server")
	need(t, "redis-cli", "redis-tools")
	need(t, "nginx", "nginx-light")
	need(t, "psql", "postgresql-client")
	need(t, "curl", "curl")
	return writeShop(t, d.dir, registry, filepath.Dir(pgBin[0]))
}

// writeShop writes the shop's files into base/shop: the compose file, its
// override file, the .env that says where the registry, PostgreSQL's
// programs and the data (base/data) are, and what the services read.
func writeShop(t *testing.T, base, registry, pgBin string) string {
	t.Helper()
	dir := filepath.Join(base, "shop")
	data := filepath.Join(base, "data")
	for _, p := range []string{filepath.Join(dir, "migrations"), data} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each copy's postgres makes its cluster here, as the postgres user.
	if err := os.Chmod(data, 0o1777); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"compose.yaml":          shopCompose,
		"compose.override.yaml": shopOverride,
		".env": fmt.Sprintf("REGISTRY=%s\nDB_HOST=127.0.0.1\nDB_PASSWORD=not-used\nREDIS_HOST=127.0.0.1\nGREETING=from-dotenv\nPGBIN=%s\nDATA=%s\n",
			registry, pgBin, data),
		"nginx.conf": fmt.Sprintf(`error_log stderr;
events {}
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:8080;
		location = /healthz { return 200 "ok\n"; }
		location /static/ { proxy_pass http://127.0.0.1:8081/; }
		location / { proxy_pass http://127.0.0.1:8000; }
	}
}
`, data),
	}
	for name, text := range shopFiles {
		files[name] = text
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestComposeShop: a web shop's compose file, with its override file and
// .env, comes up twice as two projects with up --wait, its services
// native through x-flyd and one container whose image is pulled from a
// registry; each copy answers the real clients (psql, redis-cli, curl
// through nginx) with its own data; down --volumes leaves nothing.
func TestComposeShop(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	reg, err := ctrtest.ServeRegistry(archive, []string{"shop/static"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	dir := shopDir(t, d, reg.Addr)
	compose, override := filepath.Join(dir, "compose.yaml"), filepath.Join(dir, "compose.override.yaml")

	events := startStream(t, d.socket, "events")
	started := time.Now()
	for _, p := range []struct{ name, profile string }{{"shop-a", ""}, {"shop-b", "debug"}} {
		args := []string{"up", "--wait", "-p", p.name, "-f", compose, "-f", override}
		if p.profile != "" {
			args = append(args, "--profile", p.profile)
		}
		out, errOut, code := runCLI(t, d.socket, args...)
		if code != 0 {
			t.Fatalf("flyd %s: exit %d\n%s%s\n%s", strings.Join(args, " "), code, out, errOut, d.log())
		}
		if left := strings.Contains(out, "debug left out: profiles debug"); left != (p.profile == "") {
			t.Errorf("up -p %s (profile %q) on debug:\n%s", p.name, p.profile, out)
		}
		for _, want := range []string{"service db: volumes: a native workload runs on the host's files"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("up -p %s warns of no %q:\n%s", p.name, want, errOut)
			}
		}
	}
	t.Logf("two copies up in %s", time.Since(started).Round(time.Millisecond))
	if asked := reg.Asked(); len(asked) == 0 {
		t.Error("the registry was asked nothing: the static image was not pulled")
	}
	// The pull is shown while the workload prepares: its layers and bytes.
	events.waitLine(t, "shop-a.static preparing, its pull's progress told", func(l string) bool {
		return strings.Contains(l, "shop-a.static") && strings.Contains(l, "preparing") && strings.Contains(l, "/shop/static:latest: 1/1 layers, ")
	})

	for i, p := range []string{"shop-a", "shop-b"} {
		for _, name := range []string{"db", "redis", "web", "worker-1", "worker-2", "static", "proxy"} {
			if w := d.get(t, p+"."+name); w.State != api.StateRunning {
				t.Errorf("%s.%s is %s after up --wait", p, name, w.State)
			}
		}
		if mig := d.get(t, p+".migrate"); mig.State != api.StateExited || mig.LastExit == nil || mig.LastExit.Code != 0 {
			t.Errorf("%s.migrate: %s %+v", p, mig.State, mig.LastExit)
		}
		if w := d.get(t, p+".static"); w.Spec.Kind != "containerd" || w.ContainerID == "" {
			t.Errorf("%s.static: kind %s, container %q", p, w.Spec.Kind, w.ContainerID)
		}
		if _, err := d.client.Get(context.Background(), p+".debug"); (err == nil) != (p == "shop-b") {
			t.Errorf("%s.debug: %v", p, err)
		}

		// Jobs through redis-cli, taken by the workers into PostgreSQL.
		jobs := 3 + 2*i
		rport := strconv.Itoa(published(t, d, p+".redis"))
		for j := range jobs {
			if out, err := exec.Command("redis-cli", "-p", rport, "lpush", "jobs", fmt.Sprintf("%s-job-%d", p, j)).CombinedOutput(); err != nil || !isNumber(strings.TrimSpace(string(out))) {
				t.Fatalf("redis-cli lpush: %v: %s", err, out)
			}
		}
		pport := strconv.Itoa(published(t, d, p+".db"))
		eventually(t, p+"'s workers taking the jobs", func() error {
			out, err := exec.Command("psql", "-h", "127.0.0.1", "-p", pport, "-U", "postgres", "-Atc",
				"select count(*), bool_and(job like '"+p+"-%') from jobs_done").CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != fmt.Sprintf("%d|t", jobs) {
				return fmt.Errorf("psql: %q %v; worker-1's log:\n%s", got, err, d.logs(t, p+".worker-1"))
			}
			return nil
		})

		// Through nginx: the web app, and the container's page.
		proxy := fmt.Sprintf("http://127.0.0.1:%d/", published(t, d, p+".proxy"))
		if out, err := exec.Command("curl", "-fsS", proxy).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("from-override jobs=%d hits=1", jobs) {
			t.Errorf("curl %s: %q %v", proxy, out, err)
		}
		if out, err := exec.Command("curl", "-fsS", proxy+"static/").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "static of from-dotenv" {
			t.Errorf("curl %sstatic/: %q %v", proxy, out, err)
		}
	}

	for _, p := range []string{"shop-a", "shop-b"} {
		out := d.mustCLI(t, "down", "--volumes", "-p", p)
		if !strings.Contains(out, "volume "+p+".assets removed") {
			t.Errorf("down --volumes -p %s:\n%s", p, out)
		}
	}
	assertNoProjects(t, d, "shop-a", "shop-b")
	out, err := exec.Command("ctr", "--address", ctrd.Socket, "-n", "flyd", "containers", "ls", "-q").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left after down: %q %v", out, err)
	}
	if es, _ := os.ReadDir(filepath.Join(d.stateDir, "volumes")); len(es) != 0 {
		t.Errorf("volumes left after down --volumes: %v", es)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "..", "data", "nginx-*.pid")); len(m) != 0 {
		t.Errorf("nginx left its pid files: %v", m)
	}
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
