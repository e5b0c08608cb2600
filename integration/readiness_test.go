package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestHealthLogPostgres: PostgreSQL says "database system is ready to
// accept connections" once it is; with that line as its check, `apply
// --wait` returns once postgres has printed it, and a client connects at
// once. A restart is ready again by its own line.
func TestHealthLogPostgres(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	bin, data := postgres(t, d.dir)
	port := freePort(t)
	d.mustCLI(t, "apply", "--wait", "--timeout", "1m", "-f", d.writeSpec(t, "pg.yaml", fmt.Sprintf(`
name: pg
command: [%q, "-D", %q, "-k", %q, "-p", "${PORT_PG}", "-c", "listen_addresses=127.0.0.1"]
user: postgres
endpoints: [{name: pg, port: %d}]
health: {log: "database system is ready to accept connections", timeout: 1m}
stop: {signal: SIGINT, mode: main, timeout: 20s}
`, bin, data, data, port)))
	psql := func() error {
		out, err := exec.Command("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-Atc", "select 1").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			return fmt.Errorf("psql: %v: %s", err, out)
		}
		return nil
	}
	if err := psql(); err != nil {
		t.Fatalf("apply --wait returned before postgres took connections: %v", err)
	}
	if w := d.get(t, "pg"); w.Healthy == nil || !*w.Healthy {
		t.Fatalf("pg is not healthy: %+v", w)
	}
	d.mustCLI(t, "restart", "--wait", "pg")
	if err := psql(); err != nil {
		t.Fatalf("restart --wait returned before postgres took connections: %v", err)
	}
	if n := strings.Count(d.logs(t, "pg"), "ready to accept connections"); n != 2 {
		t.Errorf("the log holds the line %d times, want 2: one a run", n)
	}
}

// TestHealthLogLine: a line cut across two writes is matched whole; the
// readiness it gives survives a daemon restart; a later run that does
// not print it is unhealthy after its timeout, though an earlier run's
// line is in the log; bad patterns and watchdogs are refused at apply.
func TestHealthLogLine(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	spec := d.writeSpec(t, "talker.yaml", fmt.Sprintf(`
name: talker
command: ["/bin/sh", "-c", "if [ -e seen ]; then echo 'almost ready? not this time'; else touch seen; printf 'almost rea'; sleep 0.3; printf 'dy\\n'; fi; exec sleep 1000"]
workdir: %q
health: {log: "^almost ready$", timeout: 2s}
`, d.dir))
	began := time.Now()
	d.mustCLI(t, "apply", "--wait", "-f", spec)
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("up after %v, before the line was whole", took)
	}
	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	d.waitWorkload(t, "talker", "healthy after a daemon restart", healthy(true))

	events, err := d.client.Events(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI(t, "restart", "talker")
	w := d.waitWorkload(t, "talker", "judged", func(w *api.Workload) bool { return w.Healthy != nil })
	if *w.Healthy {
		t.Fatal("the second run is healthy by the first run's line")
	}
	for ev := range events {
		if ev.Type == api.EventHealth && ev.Workload == "talker" {
			if !strings.Contains(ev.Message, "no line of its output matched health.log within 2s") {
				t.Errorf("health event %q", ev.Message)
			}
			break
		}
	}

	for _, bad := range []struct{ health, field string }{
		{`{log: "ready ("}`, "health.log"},
		{`{notify: true, watchdog: 50ms}`, "health.watchdog"},
		{`{log: "ready", watchdog: 10s}`, "health.watchdog"},
	} {
		_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad.yaml", "name: bad\ncommand: [\"/bin/true\"]\nhealth: "+bad.health+"\n"))
		if code != 1 || !strings.Contains(errOut, bad.field) {
			t.Errorf("health %s: exit %d, %s; want refused naming %s", bad.health, code, errOut, bad.field)
		}
	}
}

// watchdogProgram is a Python program that says READY=1 on its notify
// socket and then does its arguments in turn: keep:S sends WATCHDOG=1
// every half period for S seconds, sleep:S is silent, extend:S sends
// EXTEND_TIMEOUT_USEC, reload and ready send RELOADING=1 and READY=1. It
// prints each step done, then "silent", and sends nothing more.
const watchdogProgram = `
import os, socket, sys, time
addr = os.environ["NOTIFY_SOCKET"]
usec = int(os.environ["WATCHDOG_USEC"])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def say(msg):
    s.sendto(msg.encode(), addr)
print("pid", os.getpid(), "WATCHDOG_PID", os.environ.get("WATCHDOG_PID"), "WATCHDOG_USEC", usec, flush=True)
say("READY=1")
for step in sys.argv[1:]:
    what, _, arg = step.partition(":")
    if what == "keep":
        end = time.monotonic() + float(arg)
        while time.monotonic() < end:
            say("WATCHDOG=1")
            time.sleep(usec / 2e6)
    elif what == "sleep":
        time.sleep(float(arg))
    elif what == "extend":
        say("EXTEND_TIMEOUT_USEC=%d" % int(float(arg) * 1e6))
    elif what == "reload":
        say("RELOADING=1")
    elif what == "ready":
        say("READY=1")
    print(step, "done", flush=True)
print("silent", flush=True)
time.sleep(3600)
`

func writeWatchdogProgram(t *testing.T, d *daemon) string {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	path := filepath.Join(d.dir, "watchdog.py")
	if err := os.WriteFile(path, []byte(watchdogProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// healthEvents collects the health events of name from now on.
func healthEvents(t *testing.T, d *daemon, name string) func() []string {
	t.Helper()
	ch, err := d.client.Events(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	go func() {
		for ev := range ch {
			if ev.Type == api.EventHealth && ev.Workload == name {
				mu.Lock()
				got = append(got, ev.Message)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestHealthWatchdog: a program given WATCHDOG_USEC and its own pid as
// WATCHDOG_PID keeps itself healthy by its keepalives; when they stop it
// is unhealthy a period later and, with health.restart, restarted.
func TestHealthWatchdog(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	prog := writeWatchdogProgram(t, d)
	events := healthEvents(t, d, "beat")
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "beat.yaml", fmt.Sprintf(`
name: beat
command: ["python3", %q, "keep:3"]
user: nobody
health: {notify: true, watchdog: 1s, restart: true}
restart: {max_restarts: -1}
`, prog)))
	log := d.waitLog(t, "beat", "WATCHDOG_USEC")
	m := regexp.MustCompile(`pid (\d+) WATCHDOG_PID (\S+) WATCHDOG_USEC (\d+)`).FindStringSubmatch(log)
	if m == nil || m[1] != m[2] || m[3] != "1000000" {
		t.Errorf("the program was given %q; want its own pid and 1000000", m)
	}
	w := d.waitWorkload(t, "beat", "restarted once its keepalives stopped", func(w *api.Workload) bool { return w.Restarts >= 1 })
	if w.State != api.StateRunning && w.State != api.StateStarting {
		t.Errorf("beat is %s after its restart", w.State)
	}
	eventually(t, "healthy, then unhealthy for no keepalive", func() error {
		if got := events(); len(got) < 2 || got[0] != "healthy" || !strings.Contains(got[1], "no keepalive (WATCHDOG=1) within its watchdog period of 1s") {
			return fmt.Errorf("health events %q", got)
		}
		return nil
	})
	if strings.Count(d.logs(t, "beat"), "keep:3 done") < 1 {
		t.Error("restarted before its keepalives stopped")
	}
	d.mustCLI(t, "stop", "beat")
}

// TestHealthWatchdogExtend: EXTEND_TIMEOUT_USEC carries a program over a
// silence longer than its period, and so does it over a reload between
// RELOADING=1 and READY=1; once it is silent past its deadline, it is
// unhealthy.
func TestHealthWatchdogExtend(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	prog := writeWatchdogProgram(t, d)
	events := healthEvents(t, d, "slow")
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "slow.yaml", fmt.Sprintf(`
name: slow
command: ["/usr/bin/python3", %q, "keep:1", "extend:4", "sleep:2.5", "reload", "extend:4", "sleep:2.5", "ready", "keep:1"]
health: {notify: true, watchdog: 1s}
`, prog)))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := waitLogLine(ctx, d, "slow", "keep:1 done\nsilent"); err != nil {
		t.Fatal(err)
	}
	if got := events(); len(got) != 1 || got[0] != "healthy" {
		t.Fatalf("health events %q through its extended silences; want healthy alone", got)
	}
	d.waitWorkload(t, "slow", "unhealthy once silent", healthy(false))
	eventually(t, "an unhealthy event", func() error {
		if got := events(); len(got) != 2 || !strings.Contains(got[1], "WATCHDOG=1") {
			return fmt.Errorf("health events %q", got)
		}
		return nil
	})
	if w := d.get(t, "slow"); w.Restarts != 0 || w.State != api.StateRunning {
		t.Errorf("without health.restart: %s, %d restarts", w.State, w.Restarts)
	}
}

// waitLogLine waits until name's log holds want.
func waitLogLine(ctx context.Context, d *daemon, name, want string) error {
	for {
		var b strings.Builder
		err := d.client.Logs(ctx, name, api.LogQuery{Tail: -1}, api.WriteLog(&b))
		if err == nil && strings.Contains(b.String(), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("log of %s never held %q: %v\n%s", name, want, err, b.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestHealthLogAdopted: a run whose daemon restarts before it prints its
// line is ready by that line all the same: the next daemon reads its
// output from where the run began, what came while no daemon read
// included.
func TestHealthLogAdopted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "late.yaml", `
name: late
command: ["/bin/sh", "-c", "echo starting; sleep 2; echo ready; exec sleep 1000"]
health: {log: "^ready$", timeout: 1m}
`))
	d.waitLog(t, "late", "starting")
	d.terminate(t)
	time.Sleep(2500 * time.Millisecond) // the line is written while no daemon reads
	d = startDaemon(t, inDir(d.dir))
	w := d.waitWorkload(t, "late", "healthy by the line it printed while no daemon read", healthy(true))
	if w.Restarts != 0 {
		t.Errorf("%d restarts", w.Restarts)
	}
}
