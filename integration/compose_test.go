package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// composeStack is a compose file whose services run natively under flyd
// through x-flyd (their images are docker compose's): a redis, a
// one-shot migration, a web app after both, replicated workers, and a
// service of a profile not asked for.
const composeStack = `name: shop
services:
  cache:
    image: docker.io/library/redis:7
    x-flyd:
      kind: native
      command: [@REDIS@, --port, "$${PORT_REDIS}", --bind, 127.0.0.1, --save, "", --appendonly, "no", --dir, /tmp]
      @AS@
      endpoints: [{name: redis, port: ephemeral}]
      health: {tcp: redis, send: "PING\r\n", expect: "+PONG", interval: 100ms}
  migrate:
    image: docker.io/library/busybox
    depends_on:
      cache: {condition: service_healthy}
    x-flyd: {kind: native, command: [/bin/sh, -c, "echo migrated to ${MIGRATION}"]}
  web:
    image: docker.io/library/python:3
    environment:
      GREETING: ${GREETING:-hello}
    depends_on:
      migrate: {condition: service_completed_successfully}
      cache: {condition: service_healthy, restart: true}
    restart: always
    x-flyd:
      kind: native
      command: [/usr/bin/python3, -m, http.server, "$${PORT_HTTP}", --bind, 127.0.0.1]
      endpoints: [{name: http, port: ephemeral}]
      health: {http: {endpoint: http}, interval: 200ms}
      uses: [cache]
  worker:
    image: docker.io/library/busybox
    deploy: {replicas: 2}
    x-flyd: {kind: native, command: [/bin/sleep, "600"]}
  debug:
    image: docker.io/library/busybox
    profiles: [debug]
    x-flyd: {kind: native, command: [/bin/sleep, "600"]}
`

// TestComposeFileTwoProjects: a compose file with its override file and
// .env, brought up as it is, twice, as two projects side by side; config
// prints what up applies; down takes each away.
func TestComposeFileTwoProjects(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	redis := need(t, "redis-server", "redis-server")
	as := ""
	if _, err := user.Lookup("redis"); err == nil {
		as = "user: redis"
	}
	dir := filepath.Join(d.dir, "shop")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"compose.yaml":          strings.NewReplacer("@REDIS@", redis, "@AS@", as).Replace(composeStack),
		"compose.override.yaml": "services:\n  web:\n    environment: {EXTRA: from-override}\n",
		".env":                  "GREETING=from-dotenv\nMIGRATION=v2\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cfg := d.mustCLI(t, "config", "-f", dir)
	for _, want := range []string{"kind: network\nname: default\nproject: shop\n", "name: web\nproject: shop\nkind: native\n", "EXTRA: from-override", "GREETING: from-dotenv", "- cache:healthy+restart", "replicas: 2"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("flyd config has no %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "name: debug") {
		t.Errorf("flyd config shows the debug service, whose profile is not asked for:\n%s", cfg)
	}
	// A flyd file after the compose files changes a service as an
	// override file would, in the compose project.
	over := d.writeSpec(t, "flyd-over.yaml", "name: web\nenv: {FLYD: over}\nrestart: {max_restarts: 7}\n")
	cfg = d.mustCLI(t, "config", "-f", dir, "-f", over)
	for _, want := range []string{"name: web\nproject: shop\nkind: native\n", "EXTRA: from-override", "FLYD: over", "max_restarts: 7"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("flyd config -f DIR -f flyd-over.yaml has no %q:\n%s", want, cfg)
		}
	}
	if n := strings.Count(cfg, "name: web\n"); n != 1 {
		t.Errorf("flyd config -f DIR -f flyd-over.yaml shows web %d times:\n%s", n, cfg)
	}

	for _, p := range []string{"shop-a", "shop-b"} {
		out := d.mustCLI(t, "up", "-p", p, "-f", dir, "--wait")
		if !strings.Contains(out, "debug left out: profiles debug") {
			t.Errorf("up -p %s says nothing of debug left out:\n%s", p, out)
		}
	}
	for _, p := range []string{"shop-a", "shop-b"} {
		web := d.waitWorkload(t, p+".web", "healthy", healthy(true))
		if web.Spec.Env["GREETING"] != "from-dotenv" || web.Spec.Env["EXTRA"] != "from-override" || web.Spec.Kind != "native" {
			t.Errorf("%s.web: kind %s env %v", p, web.Spec.Kind, web.Spec.Env)
		}
		mig := d.waitState(t, p+".migrate", api.StateExited)
		if mig.LastExit == nil || mig.LastExit.Code != 0 {
			t.Errorf("%s.migrate: %+v", p, mig.LastExit)
		}
		if logs := d.mustCLI(t, "logs", p+".migrate"); !strings.Contains(logs, "migrated to v2") {
			t.Errorf("%s.migrate's log: %q", p, logs)
		}
		for _, r := range []string{"worker-1", "worker-2"} {
			d.waitState(t, p+"."+r, api.StateRunning)
		}
		if w := d.get(t, p+".web"); w.Spec.Network != p+".default" {
			t.Errorf("%s.web in network %q", p, w.Spec.Network)
		}
	}
	a, b := d.get(t, "shop-a.web"), d.get(t, "shop-b.web")
	if a.PID == b.PID {
		t.Error("the two projects share a web")
	}

	d.mustCLI(t, "down", "-p", "shop-a")
	d.mustCLI(t, "down", "-p", "shop-b", "-f", dir)
	ws, err := d.client.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if strings.HasPrefix(w.Name, "shop-") {
			t.Errorf("%s is left after down", w.Name)
		}
	}
}

// TestComposeFileRefused: a compose file flyd cannot honour is refused
// whole, naming the file, the service and the field, and nothing runs.
func TestComposeFileRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "compose.yaml", "services:\n  ok:\n    image: x\n    x-flyd: {kind: native, command: [/bin/sleep, '600']}\n  bad:\n    image: x\n    privileged: true\n")
	_, errOut, code := runCLI(t, d.socket, "up", "-p", "refused", "-f", file)
	if code == 0 || !strings.Contains(errOut, "compose.yaml: service bad: privileged: flyd cannot honour it") {
		t.Fatalf("up of a refused compose file: exit %d, stderr %q", code, errOut)
	}
	ws, err := d.client.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if strings.HasPrefix(w.Name, "refused.") {
			t.Errorf("%s was applied from a refused file", w.Name)
		}
	}

	// config --format compose prints compose's model: of compose files
	// alone, and of a valid one.
	own := d.writeSpec(t, "own.yaml", "name: own\ncommand: [/bin/sleep, '600']\n")
	if _, errOut, code := runCLI(t, d.socket, "config", "--format", "compose", "-f", own); code != 2 || !strings.Contains(errOut, "--format compose: "+own+" is not a compose file") {
		t.Errorf("config --format compose of flyd's own file: exit %d, %q", code, errOut)
	}
	invalid := d.writeSpec(t, "docker-compose.yml", "services:\n  web:\n    image: x\n    ports: {a: b}\n")
	if _, errOut, code := runCLI(t, d.socket, "config", "--format", "compose", "-f", invalid); code == 0 || !strings.Contains(errOut, "docker-compose.yml") || !strings.Contains(errOut, "services.web.ports") {
		t.Errorf("config --format compose of an invalid file: exit %d, %q", code, errOut)
	}
}
