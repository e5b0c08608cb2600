package compose

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/specload"
)

// write puts files in a new directory, named after the test's, and
// returns it.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "My_Shop")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, dir string, o Options) (*Project, []string, error) {
	t.Helper()
	if o.Files == nil {
		o.Files = specload.ComposeFilesIn(dir)
	}
	var warns []string
	o.Warn = func(msg string) { warns = append(warns, msg) }
	p, err := Load(context.Background(), o)
	return p, warns, err
}

func workload(t *testing.T, p *Project, name string) *spec.Workload {
	t.Helper()
	for _, w := range p.Docs.Workloads {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no workload %s in %v", name, p.Docs.Workloads)
	return nil
}

const stack = `
services:
  db:
    image: docker.io/library/postgres:16
    environment:
      POSTGRES_PASSWORD: ${DB_PASSWORD}
    env_file: [db.env]
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: 2s
      timeout: 1s
      retries: 5
      start_period: 10s
    volumes:
      - pgdata:/var/lib/postgresql/data
      - ./init:/docker-entrypoint-initdb.d:ro
    stop_signal: SIGINT
    stop_grace_period: 30s
    expose: ["5432"]
    restart: unless-stopped
  migrate:
    image: docker.io/library/app:1
    entrypoint: ["/app/migrate"]
    command: ["--up"]
    depends_on:
      db: {condition: service_healthy, restart: true}
    restart: "no"
  web:
    image: docker.io/library/app:1
    command: ["/app/web", "--port", "8000"]
    working_dir: /app
    user: "1000"
    ports: ["8080:8000"]
    depends_on:
      migrate: {condition: service_completed_successfully}
      cache: {condition: service_started}
    healthcheck:
      test: ["CMD", "/app/health"]
    restart: on-failure:3
    deploy:
      resources:
        limits: {memory: 256M, cpus: "0.5", pids: 100}
    develop:
      watch:
        - {path: ./static, action: sync, target: /app/static, ignore: ["*.tmp"]}
        - {path: ./src, action: restart}
  cache:
    image: docker.io/library/redis:7
    networks: [back]
  worker:
    image: docker.io/library/app:1
    command: ["/app/worker"]
    deploy: {replicas: 3}
    profiles: [jobs]
    restart: always
  tool:
    image: docker.io/library/app:1
    x-flyd:
      kind: native
      command: [/usr/bin/env]
      endpoints: [{name: http, port: ephemeral}]
      health: {tcp: http}
networks:
  back:
    internal: true
volumes:
  pgdata: {}
`

func TestMapsEveryField(t *testing.T) {
	dir := write(t, map[string]string{
		"compose.yaml":          stack,
		"compose.override.yaml": "services:\n  web:\n    environment: {DEBUG: \"1\"}\n",
		".env":                  "DB_PASSWORD=from-dotenv\n",
		"db.env":                "PGDATA=/var/lib/postgresql/data/pg\n",
	})
	p, warns, err := load(t, dir, Options{Environ: []string{"PATH=/usr/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "my-shop" {
		t.Errorf("project %q, want my-shop (the directory's name as a DNS label)", p.Name)
	}
	db := workload(t, p, "db")
	if db.Kind != spec.KindContainerd || db.Containerd.Image != "docker.io/library/postgres:16" {
		t.Errorf("db: kind %s, %+v", db.Kind, db.Containerd)
	}
	if db.Env["POSTGRES_PASSWORD"] != "from-dotenv" || db.Env["PGDATA"] != "/var/lib/postgresql/data/pg" {
		t.Errorf("db env %v: want .env's interpolation and env_file's variable", db.Env)
	}
	if h := db.Health; h == nil || !slices.Equal(h.Exec, []string{"/bin/sh", "-c", "pg_isready -U postgres"}) ||
		h.Interval.Std().String() != "2s" || h.Timeout.Std().String() != "1s" || h.Failures != 5 || h.StartPeriod.Std().String() != "10s" {
		t.Errorf("db health %+v", db.Health)
	}
	wantVols := []string{"pgdata:/var/lib/postgresql/data", filepath.Join(dir, "init") + ":/docker-entrypoint-initdb.d:ro"}
	if !slices.Equal(db.Containerd.Volumes, wantVols) {
		t.Errorf("db volumes %v, want %v", db.Containerd.Volumes, wantVols)
	}
	if db.Stop.Signal != "SIGINT" || db.Stop.Timeout.Std().String() != "30s" {
		t.Errorf("db stop %+v", db.Stop)
	}
	if len(db.Endpoints) != 1 || db.Endpoints[0].Name != "port-5432" || db.Endpoints[0].Port != spec.FixedPort(5432) || db.Endpoints[0].Publish.Mode != "" {
		t.Errorf("db endpoints %+v", db.Endpoints)
	}
	if db.Restart.Policy != spec.RestartAlways || db.Restart.MaxRestarts != spec.UnlimitedRestarts {
		t.Errorf("db restart %+v", db.Restart)
	}
	if db.Network != "default" {
		t.Errorf("db network %q, want the project's default network", db.Network)
	}

	mig := workload(t, p, "migrate")
	if !slices.Equal(mig.Command, []string{"/app/migrate", "--up"}) {
		t.Errorf("migrate command %v: want entrypoint then command", mig.Command)
	}
	if !slices.Equal(mig.After, []string{"db:healthy+restart"}) || mig.Restart.Policy != spec.RestartNever {
		t.Errorf("migrate after %v restart %s", mig.After, mig.Restart.Policy)
	}

	web := workload(t, p, "web")
	if !slices.Equal(web.After, []string{"cache:started", "migrate:completed"}) {
		t.Errorf("web after %v", web.After)
	}
	if web.Workdir != "/app" || web.User != "1000" || web.Env["DEBUG"] != "1" {
		t.Errorf("web workdir %q user %q env %v (DEBUG from the override file)", web.Workdir, web.User, web.Env)
	}
	if len(web.Endpoints) != 1 || web.Endpoints[0].Port != spec.FixedPort(8000) || web.Endpoints[0].Publish != spec.FixedPort(8080) {
		t.Errorf("web endpoints %+v", web.Endpoints)
	}
	if web.Restart.Policy != spec.RestartOnFailure || web.Restart.MaxRestarts != 3 {
		t.Errorf("web restart %+v", web.Restart)
	}
	if r := web.Resources; r == nil || r.MemoryMax != 256<<20 || r.CPUMax != "0.5" || r.PidsMax != 100 {
		t.Errorf("web resources %+v", web.Resources)
	}
	if len(web.Watch) != 2 || web.Watch[0].Action != spec.WatchSync || web.Watch[0].Target != "/app/static" ||
		web.Watch[0].Path != filepath.Join(dir, "static") || !slices.Equal(web.Watch[0].Ignore, []string{"*.tmp"}) ||
		web.Watch[1].Action != spec.WatchRestart {
		t.Errorf("web watch %+v", web.Watch)
	}
	if !slices.Equal(web.Health.Exec, []string{"/app/health"}) {
		t.Errorf("web health %+v", web.Health)
	}

	cache := workload(t, p, "cache")
	if cache.Network != "back" {
		t.Errorf("cache network %q", cache.Network)
	}
	worker := workload(t, p, "worker")
	if worker.Replicas != 3 || !slices.Equal(worker.Profiles, []string{"jobs"}) {
		t.Errorf("worker replicas %d profiles %v", worker.Replicas, worker.Profiles)
	}
	tool := workload(t, p, "tool")
	if tool.Kind != spec.KindNative || tool.Containerd != nil || !slices.Equal(tool.Command, []string{"/usr/bin/env"}) ||
		len(tool.Endpoints) != 1 || tool.Health.TCP != "http" || tool.Workdir != dir {
		t.Errorf("tool: %+v", tool)
	}

	var nets []string
	for _, d := range p.Docs.Docs {
		n := d.(*spec.Network)
		nets = append(nets, n.Name)
		if n.Name == "back" && n.AllowsEgress() {
			t.Errorf("network back is internal: want egress off")
		}
	}
	if !slices.Equal(nets, []string{"back", "default"}) || p.Docs.Docs[0].(*spec.Network).Project != "my-shop" {
		t.Errorf("networks %v", nets)
	}
	if !hasWarning(warns, "compose.yaml: service web: command: ") {
		t.Errorf("no warning of command without entrypoint in %q", warns)
	}
}

func hasWarning(warns []string, prefix string) bool {
	for _, w := range warns {
		if strings.Contains(w, prefix) {
			return true
		}
	}
	return false
}

func TestNameFromFileAndFlag(t *testing.T) {
	dir := write(t, map[string]string{"compose.yaml": "name: shop\nservices:\n  a: {image: x}\n"})
	p, _, err := load(t, dir, Options{})
	if err != nil || p.Name != "shop" {
		t.Fatalf("name %v %v: want the file's name:", p, err)
	}
	p, _, err = load(t, dir, Options{Name: "ci-7"})
	if err != nil || p.Name != "ci-7" || p.Docs.Workloads[0].Name != "a" {
		t.Fatalf("-p: %v %v", p, err)
	}
}

func TestSeveralFilesMerge(t *testing.T) {
	dir := write(t, map[string]string{
		"base.yaml":  "services:\n  a:\n    image: x\n    environment: {A: '1', B: '1'}\n",
		"extra.yaml": "services:\n  a:\n    environment: {B: '2'}\n  b:\n    extends: {service: a, file: base.yaml}\n",
	})
	p, _, err := load(t, dir, Options{Files: []string{filepath.Join(dir, "base.yaml"), filepath.Join(dir, "extra.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := workload(t, p, "a"), workload(t, p, "b")
	if a.Env["A"] != "1" || a.Env["B"] != "2" || b.Env["B"] != "1" || b.Containerd.Image != "x" {
		t.Errorf("a env %v, b %v %v", a.Env, b.Env, b.Containerd)
	}
}

// Refusals name the file, the service and the field.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"services:\n  a:\n    build: .\n", "compose.yaml: service a: build: flyd runs images and builds none"},
		{"services:\n  a:\n    image: x\n    privileged: true\n", "compose.yaml: service a: privileged: flyd cannot honour it"},
		{"services:\n  a:\n    image: x\n    cap_add: [NET_ADMIN]\n", "service a: cap_add:"},
		{"services:\n  a:\n    image: x\n    ports: ['53:53/udp']\n", "service a: ports[0]: protocol udp"},
		{"services:\n  a:\n    image: x\n    ports: ['8000-8002:80']\n", "service a: ports[0]: a range"},
		{"services:\n  a:\n    image: x\n    volumes: [/data]\n", "service a: volumes[0]: an anonymous volume"},
		{"services:\n  a:\n    image: x\n    volumes: [{type: tmpfs, target: /t}]\n", "service a: volumes[0]: type tmpfs"},
		{"services:\n  a:\n    image: x\n    network_mode: none\n", "service a: network_mode: none"},
		{"services:\n  a:\n    image: x\n    networks: [n1, n2]\nnetworks: {n1: {}, n2: {}}\n", "service a: networks: n1, n2: a flyd workload is in one network"},
		{"services:\n  a:\n    image: x\n    develop: {watch: [{path: ., action: rebuild}]}\n", "service a: develop.watch[0].action: rebuild"},
		{"services:\n  a:\n    image: x\n    secrets: [s]\nsecrets: {s: {file: ./s}}\n", "compose.yaml: secrets:"},
		{"services:\n  a:\n    image: x\nnetworks: {n: {external: true}}\n", "networks: n: external"},
		{"services:\n  a:\n    image: x\n    x-flyd: {kind: native}\n", "service a: x-flyd.command: is required for kind native"},
		{"services:\n  a:\n    image: x\n    x-flyd: {kind: native, command: [x], bogus: 1}\n", "service a: "},
		{"services:\n  a:\n    image: x\n    x-flyd: {name: b}\n", "service a: x-flyd: name:"},
		{"services:\n  a:\n    image: x\n    healthcheck: {test: [CMD, ''] }\n", "service a: healthcheck (flyd's health.exec[0])"},
		{"services:\n  a:\n    image: x\n    user: '1000:1000'\n", "service a: user (flyd's user): must be a user name or a numeric uid, without a group"},
	} {
		dir := write(t, map[string]string{"compose.yaml": tc.yaml})
		_, _, err := load(t, dir, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got %v\n  want an error with %q", tc.yaml, err, tc.want)
		}
	}
}

// compose's own validation is kept: its message, naming the file.
func TestComposeValidation(t *testing.T) {
	dir := write(t, map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    depends_on: [missing]\n"})
	_, _, err := load(t, dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v, want compose's refusal of a dependency on a missing service", err)
	}
	dir = write(t, map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    restart: sometimes\n"})
	if _, _, err = load(t, dir, Options{}); err == nil {
		t.Fatal("restart: sometimes was taken")
	}
}

func TestWarnings(t *testing.T) {
	dir := write(t, map[string]string{"compose.yaml": `services:
  a:
    image: x
    entrypoint: [/x]
    container_name: ax
    labels: {team: shop}
    depends_on:
      b: {condition: service_started, required: false}
  b:
    image: x
    entrypoint: [/x]
    environment: [UNSET_HERE]
`})
	p, warns, err := load(t, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"compose.yaml: service a: container_name: not used",
		"compose.yaml: service a: labels: flyd keeps no labels",
		"compose.yaml: service a: depends_on.b.required: false",
		"compose.yaml: service b: environment.UNSET_HERE: has no value",
	} {
		if !hasWarning(warns, want) {
			t.Errorf("no warning %q in %q", want, warns)
		}
	}
	if _, ok := workload(t, p, "b").Env["UNSET_HERE"]; ok {
		t.Error("a variable without a value was set")
	}
}

func TestIsFile(t *testing.T) {
	dir := write(t, map[string]string{
		"stack.yml":    "# a stack\nservices:\n  a: {image: x}\n",
		"flyd.yaml":    "name: a\ncommand: [x]\n",
		"compose.yaml": "services: {}\n",
	})
	for name, want := range map[string]bool{"stack.yml": true, "flyd.yaml": false, "compose.yaml": true} {
		if got := specload.IsComposeFile(filepath.Join(dir, name)); got != want {
			t.Errorf("IsComposeFile(%s) = %v, want %v", name, got, want)
		}
	}
	if got := specload.ComposeFilesIn(dir); len(got) != 1 || filepath.Base(got[0]) != "compose.yaml" {
		t.Errorf("InDir %v", got)
	}
}

// TestModelYAML: the compose model is printed as compose resolved it
// (the override merged, .env's values in), with the services of the
// profiles asked for, '$' written '$$' so compose reads it back the same,
// and x-flyd's secrets redacted.
func TestModelYAML(t *testing.T) {
	dir := write(t, map[string]string{
		"compose.yaml": `services:
  web:
    image: web:1
    command: [sh, -c, 'echo $$HOME ${GREETING}']
    x-flyd: {kind: native, command: [/bin/true], secret_env: {TOKEN: hunter2}}
  debug:
    image: busybox
    profiles: [debug]
`,
		"compose.override.yaml": "services:\n  web:\n    environment: {EXTRA: over}\n",
		".env":                  "GREETING=hi\n",
	})
	p, _, err := load(t, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.ModelYAML(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"echo $$HOME hi", "EXTRA: over", "TOKEN: <redacted>", "name: my_shop"} {
		if !strings.Contains(text, want) {
			t.Errorf("the model has no %q:\n%s", want, text)
		}
	}
	for _, not := range []string{"hunter2", "debug:"} {
		if strings.Contains(text, not) {
			t.Errorf("the model has %q:\n%s", not, text)
		}
	}
	if ext := p.Model.Services["web"].Extensions[Extension].(map[string]any); ext["secret_env"].(map[string]any)["TOKEN"] != "hunter2" {
		t.Errorf("redacting changed the project's own model: %v", ext)
	}
	for _, profiles := range [][]string{{"debug"}, {AllProfiles}} {
		out, err := p.ModelYAML(profiles)
		if err != nil || !strings.Contains(string(out), "debug:") {
			t.Errorf("profiles %v: no debug service (%v):\n%s", profiles, err, out)
		}
	}
}

// A field compose's loader refuses is named with its file and line: of
// the file that gives it, an override file's own.
func TestComposeErrorsLocated(t *testing.T) {
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    ports: {p: q}\n"}, "compose.yaml:4: services.a.ports: must be a array"},
		{map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n\n    bogus: 1\n"}, "compose.yaml:5: services.a.bogus: compose does not know this field"},
		{map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    volumes:\n      - type: bind\n        sourc: /x\n        target: /y\n"}, "compose.yaml:5: services.a.volumes.0: additional properties 'sourc' not allowed"},
		{map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n    deploy: {replicas: many}\n"}, `compose.yaml:4: services.a.deploy.replicas: failed to cast to expected type`},
		{map[string]string{
			"compose.yaml":          "services:\n  a:\n    image: x\n    healthcheck: {interval: 1s}\n",
			"compose.override.yaml": "services:\n  a:\n    healthcheck:\n      interval: forever\n",
		}, `compose.override.yaml:4: services.a.healthcheck.interval: time: invalid duration "forever"`},
		{map[string]string{"compose.yaml": "services:\n  a:\n    image: x\n  b:\n    image: x\n    ports:\n      - 8080:80\n      - \"127.0.1:8081:81\"\n"}, `compose.yaml:8: services.b.ports.1: Invalid ip address: 127.0.1`},
	} {
		dir := write(t, tc.files)
		_, _, err := load(t, dir, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v\n  got %v\n  want an error with %q", tc.files, err, tc.want)
		}
	}
}
