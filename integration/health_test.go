package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestHealthAndAfter: a dependent waits until its dependency's HTTP check
// passes; a workload whose exec check fails is marked unhealthy and, when
// its spec asks, restarted.
func TestHealthAndAfter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "deps.yaml", `
name: db
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}]
network: hnet
health: {http: {endpoint: http, path: /}, interval: 100ms, timeout: 1s, failures: 1}
---
name: app
command: ["@PROG@", "print", "1"]
after: [db]
`))
	db := d.waitWorkload(t, "db", "healthy", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.Healthy != nil && *w.Healthy
	})
	app := d.waitState(t, "app", api.StateRunning)
	if app.StartedAt == nil || db.StartedAt == nil || app.StartedAt.Before(*db.StartedAt) {
		t.Fatalf("app started at %v, before db at %v", app.StartedAt, db.StartedAt)
	}

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "sick.yaml", `
name: sick
command: ["@PROG@", "print", "1"]
health: {exec: ["/bin/false"], interval: 100ms, timeout: 1s, failures: 2, restart: true}
restart: {max_restarts: -1}
`))
	d.waitWorkload(t, "sick", "restarted for failing its check", func(w *api.Workload) bool {
		return w.Restarts >= 1
	})
	ev := d.waitEvent(t, func(e api.Event) bool { return e.Type == api.EventHealth && e.Workload == "sick" })
	if ev.Message == "" || ev.Message[:9] != "unhealthy" {
		t.Fatalf("health event %+v", ev)
	}
}

// waitEvent reads the daemon's events from the start of a fresh stream
// until one matches; state is re-derived, so it only needs to happen again.
func (d *daemon) waitEvent(t *testing.T, ok func(api.Event) bool) api.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	ch, err := d.client.Events(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ok(ev) {
			return ev
		}
	}
	t.Fatal(fmt.Errorf("no such event within %s", waitFor))
	return api.Event{}
}

// TestAfterConditions: a workload can wait for a one-shot to complete;
// one whose prerequisite fails, or completes with an error, fails too,
// saying why, instead of waiting for ever.
func TestAfterConditions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// Some of these fail at once, so the apply exits 1: what each became
	// is checked below.
	runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "init.yaml", `
name: init
command: ["@PROG@", "exit", "0"]
restart: {policy: never}
---
name: db
command: ["@PROG@", "signals"]
after: ["init:completed"]
---
name: badinit
command: ["@PROG@", "exit", "3"]
restart: {policy: never}
---
name: db2
command: ["@PROG@", "signals"]
after: ["badinit:completed"]
---
name: broken
command: [/nonexistent/prog]
---
name: web
command: ["@PROG@", "signals"]
after: ["broken:started"]
`))
	if w := d.waitState(t, "db", api.StateRunning); w.PID == 0 {
		t.Errorf("db: %+v", w)
	}
	if w := d.waitState(t, "db2", api.StateFailed); !strings.Contains(w.LastError, "badinit, which it waits for to complete, ended with exit code 3") {
		t.Errorf("db2 failed because %q", w.LastError)
	}
	if w := d.waitState(t, "web", api.StateFailed); !strings.Contains(w.LastError, "broken, which it waits for, failed") {
		t.Errorf("web failed because %q", w.LastError)
	}
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad.yaml", "name: x\ncommand: [\"@PROG@\", signals]\nafter: [\"init:finished\"]\n")); code != 1 || !strings.Contains(errOut, `the condition "finished"`) {
		t.Errorf("an unknown condition: exit %d, %s", code, errOut)
	}
}

// TestApplyWait: `apply --wait` returns 0 once a workload passes its
// health check, and 1 naming a workload that dies at once.
func TestApplyWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if out, errOut, code := runCLI(t, d.socket, "apply", "--wait", "-f", d.writeSpec(t, "up.yaml", `
name: up
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}]
health: {http: {endpoint: http, path: /}, interval: 5s}
`)); code != 0 {
		t.Errorf("apply --wait of a healthy workload: exit %d, %s %s", code, out, errOut)
	}
	if w := d.get(t, "up"); w.Healthy == nil || !*w.Healthy {
		t.Errorf("apply --wait returned before up was healthy: %+v", w)
	}
	_, errOut, code := runCLI(t, d.socket, "apply", "--wait", "--timeout", "30s", "-f", d.writeSpec(t, "dies.yaml", `
name: dies
command: ["@PROG@", "exit", "3"]
restart: {policy: on-failure, max_restarts: 1, backoff: {initial: 50ms}}
`))
	if code != 1 || !strings.Contains(errOut, "not up: dies (failed: gave up after 1 restarts") {
		t.Errorf("apply --wait of a workload that dies at once: exit %d, %s", code, errOut)
	}
}

// TestUses: a consumer finds its producers' addresses under codefly's own
// names, the one that reaches each from where it runs (the host, its own
// network, across networks through a published port), and connects; it
// waits for them as for `after`.
func TestUses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	hp := freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "uses.yaml", fmt.Sprintf(`
name: pg
identity: {workspace: demo, module: store, service: pg-main}
command: ["@PROG@", "serve", "0.0.0.0:${PORT_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}]
health: {http: {endpoint: http, path: /}}
---
name: cache
identity: {workspace: demo, module: store, service: cache}
command: ["@PROG@", "serve", "${ADDR_TCP}"]
endpoints: [{name: tcp, port: hashed, publish: %d}]
network: ci-u
---
name: host-app
identity: {workspace: demo, module: web, service: front}
command: ["sh", "-c", "env | grep ^CODEFLY__ | sort; @PROG@ get $CODEFLY__ENDPOINT__STORE__PG_MAIN__HTTP__HTTP && @PROG@ get $CODEFLY__ENDPOINT__STORE__CACHE__TCP__TCP && echo both-reached; exec @PROG@ signals"]
uses: [pg, cache/tcp]
---
name: net-app
command: ["sh", "-c", "@PROG@ get $CODEFLY__ENDPOINT__STORE__CACHE__TCP__TCP && echo same-network; @PROG@ get $CODEFLY__ENDPOINT__STORE__PG_MAIN__HTTP__HTTP && echo host-reached; exec @PROG@ signals"]
uses: [cache, pg]
network: ci-u
`, hp)))
	logs := d.waitLog(t, "host-app", "both-reached")
	pg := d.get(t, "pg")
	for _, want := range []string{
		"CODEFLY__ENDPOINT__STORE__PG_MAIN__HTTP__HTTP=http://localhost:" + strconv.Itoa(pg.Ports[0].Port), // a URL, as codefly gives it
		"CODEFLY__ENDPOINT__STORE__CACHE__TCP__TCP=localhost:" + strconv.Itoa(hp),
		"CODEFLY__WORKSPACE=demo", "CODEFLY__MODULE=web", "CODEFLY__SERVICE=front",
	} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("host-app's environment lacks %s:\n%s", want, logs)
		}
	}
	d.waitLog(t, "net-app", "same-network")
	// pg listens on the host's addresses: ci-u reaches it through its gateway.
	d.waitLog(t, "net-app", "host-reached")
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad.yaml", "name: x\ncommand: [\"@PROG@\", signals]\nuses: [pg/nope]\n")); code != 1 || !strings.Contains(errOut, `uses[0]: workload pg has no endpoint "nope"`) {
		t.Errorf("a use of an unknown endpoint: exit %d, %s", code, errOut)
	}
}

// TestEndpointReferences: ${endpoint:MODULE/SERVICE/ENDPOINT} in a command
// and in env is the producer's address from where the consumer runs, by
// the seed's rule (the exact name, else the one endpoint serving the API);
// a reference to nobody, an ambiguous one and a wrong qualifier are
// refused at apply naming the key.
func TestEndpointReferences(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "refs.yaml", `
name: api
identity: {workspace: demo, module: web, service: api}
command: ["@PROG@", "serve", "0.0.0.0:${PORT_MAIN}"]
endpoints: [{name: main, api: http, port: ephemeral}, {name: admin, api: grpc, port: ephemeral}, {name: debug, api: grpc, port: ephemeral}]
health: {http: {endpoint: main, path: /}}
---
name: client
command: ["sh", "-c", "echo url=$API_URL; @PROG@ get ${endpoint:web/api/main|authority} && echo reached; exec @PROG@ signals"]
env: {API_URL: "${endpoint:web/api/http}", ADMIN: "${endpoint:web/api/admin::grpc}"}
after: [api]
`))
	logs := d.waitLog(t, "client", "reached")
	port := d.get(t, "api").Ports[0].Port
	if !strings.Contains(logs, fmt.Sprintf("url=http://localhost:%d\n", port)) {
		t.Errorf("API_URL, the one endpoint serving http, as a URL: %s", logs)
	}
	for _, tt := range []struct{ env, want string }{
		{"${endpoint:web/nobody/main}", "env.X: no workload is web/nobody"},
		{"${endpoint:web/api/grpc}", "env.X: web/api has 2 endpoints serving grpc (admin, debug)"},
		{"${endpoint:web/api/main::grpc}", "env.X: endpoint main of web/api serves http, not grpc"},
		{"${endpoint:web/api}", "env.X: an endpoint reference must be"},
	} {
		_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad.yaml", "name: bad\ncommand: [\"@PROG@\", signals]\nenv: {X: \""+tt.env+"\"}\n"))
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, %s; want %q", tt.env, code, errOut, tt.want)
		}
	}
}

// TestNotifyReadiness: a workload that says READY=1 on the NOTIFY_SOCKET
// flyd gives it is healthy with no probe, its STATUS shown as its reason;
// dependents start then; a daemon restart keeps it healthy.
func TestNotifyReadiness(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "n.yaml", `
name: pg
command: ["@PROG@", "notify", "300ms"]
user: nobody
health: {notify: true}
---
name: app
command: ["@PROG@", "signals"]
after: [pg]
`))
	if w := d.get(t, "app"); w.State != api.StatePending {
		t.Errorf("app is %s before pg said it was ready", w.State)
	}
	w := d.waitWorkload(t, "pg", "healthy by READY=1", func(w *api.Workload) bool { return w.Healthy != nil && *w.Healthy })
	if w.Reason != "serving" {
		t.Errorf("pg's reason %q, want its STATUS", w.Reason)
	}
	d.waitState(t, "app", api.StateRunning)
	d.terminate(t)
	d2 := startDaemon(t, inDir(d.dir))
	d2.waitWorkload(t, "pg", "healthy after a daemon restart", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.Healthy != nil && *w.Healthy
	})
	// A stranger's READY=1 is not the workload's.
	d2.mustCLI(t, "apply", "-f", d2.writeSpec(t, "m.yaml", "name: mute\ncommand: [\"@PROG@\", signals]\nhealth: {notify: true}\n"))
	d2.waitState(t, "mute", api.StateRunning)
	c, err := net.Dial("unixgram", filepath.Join(d2.runDir, "notify", "mute.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("READY=1")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	eventually(t, "the stranger's message refused", func() error {
		if !strings.Contains(d2.log(), "not the workload's, ignored") {
			return fmt.Errorf("no log line yet")
		}
		return nil
	})
	if w := d2.get(t, "mute"); w.Healthy != nil && *w.Healthy {
		t.Error("a stranger's READY=1 made mute healthy")
	}
	if _, errOut, code := runCLI(t, d2.socket, "apply", "-f", d2.writeSpec(t, "c.yaml", "name: c\nkind: containerd\ncontainerd: {image: x}\nhealth: {notify: true}\n")); code != 1 || !strings.Contains(errOut, "health.notify") {
		t.Errorf("notify for a container: exit %d, %s", code, errOut)
	}
}

// TestStoppedIsUnhealthy: a SIGSTOPped server still has its port accept
// connections, yet its tcp check fails, and a stopped notify program is
// unhealthy too; SIGCONT makes them healthy again.
func TestStoppedIsUnhealthy(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "frozen.yaml", `
name: frozen
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, port: ephemeral}]
network: fnet
health: {tcp: http, interval: 100ms, timeout: 1s, failures: 2}
`))
	d.waitWorkload(t, "frozen", "healthy", healthy(true))
	events, err := d.client.Events(t.Context(), 0) // open before the stop: a stream begins now
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI(t, "signal", "frozen", "STOP")
	w := d.waitWorkload(t, "frozen", "unhealthy while stopped", healthy(false))
	if w.State != api.StateRunning || w.Restarts != 0 {
		t.Errorf("stopped: %s, %d restarts; want running, none", w.State, w.Restarts)
	}
	for ev := range events {
		if ev.Type == api.EventHealth && ev.Workload == "frozen" {
			if !strings.Contains(ev.Message, "is stopped") {
				t.Errorf("the health event does not say the process is stopped: %q", ev.Message)
			}
			break
		}
	}
	d.mustCLI(t, "signal", "frozen", "CONT")
	d.waitWorkload(t, "frozen", "healthy once continued", healthy(true))
	d.mustCLI(t, "stop", "frozen")

	// A program that said READY=1 is unhealthy while stopped too.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "ready.yaml", `
name: ready
command: ["@PROG@", "notify", "100ms"]
health: {notify: true, interval: 100ms, failures: 2}
`))
	d.waitWorkload(t, "ready", "healthy by READY=1", healthy(true))
	d.mustCLI(t, "signal", "ready", "STOP")
	d.waitWorkload(t, "ready", "unhealthy while stopped", healthy(false))
	d.mustCLI(t, "signal", "ready", "CONT")
	if w := d.waitWorkload(t, "ready", "healthy once continued", healthy(true)); w.Restarts != 0 {
		t.Errorf("ready restarted %d times", w.Restarts)
	}
	d.mustCLI(t, "stop", "ready")
}
