package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

const serveSpec = `
name: web
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints:
  - {name: http, api: http, port: PORT}
restart: {policy: on-failure, backoff: {initial: 50ms, max: 1s}}
stop: {timeout: 5s}
`

// serveWorkload writes the spec of a `serve` workload on a free fixed port.
func serveWorkload(t *testing.T, d *daemon, file string) (path, addr string) {
	t.Helper()
	port := freePort(t)
	path = d.writeSpec(t, file, strings.Replace(serveSpec, "PORT", strconv.Itoa(port), 1))
	return path, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// waitServing polls addr until the serve workload with pid answers.
func waitServing(t *testing.T, addr string, pid int) string {
	t.Helper()
	var body string
	eventually(t, fmt.Sprintf("pid %d serving on %s", pid, addr), func() error {
		b, err := httpGet(addr, "/")
		if err != nil {
			return err
		}
		body = b
		if !strings.Contains(b, fmt.Sprintf("pid=%d\n", pid)) || !strings.Contains(b, "hello from testprog") {
			return fmt.Errorf("unexpected body %q", b)
		}
		return nil
	})
	return body
}

// TestServeRestartLogsStop is the whole life of a served workload through
// the CLI: apply, reach it, crash it, see it restarted, read and follow its
// logs, stop it without leaving anything behind, remove it.
func TestServeRestartLogsStop(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file, addr := serveWorkload(t, d, "web.yaml")

	if out := d.mustCLI(t, "apply", "-f", file); !strings.Contains(out, "web running") {
		t.Fatalf("apply printed %q, want web running", out)
	}
	w := d.inspect(t, "web")
	if w.State != api.StateRunning || w.PID <= 0 || len(w.Ports) != 1 || strconv.Itoa(w.Ports[0].Port) != addr[strings.LastIndex(addr, ":")+1:] {
		t.Fatalf("after apply: %+v", w)
	}
	waitServing(t, addr, w.PID)

	// A crash is restarted by policy, on the same port.
	if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w2 := d.waitWorkload(t, "web", "restarted once", func(v *api.Workload) bool {
		return v.State == api.StateRunning && v.PID != w.PID && v.PID > 0 && v.Restarts == 1
	})
	if w2.LastExit == nil || w2.LastExit.Signal != "SIGKILL" {
		t.Errorf("last_exit = %+v, want killed by SIGKILL", w2.LastExit)
	}
	if err := reaped(w.PID, d.pid()); err != nil {
		t.Error(err)
	}
	waitServing(t, addr, w2.PID)

	// Logs: everything, and the tail.
	all := d.mustCLI(t, "logs", "web")
	// ${ADDR_HTTP} is the endpoint's native address, localhost:PORT.
	if n := strings.Count(all, "serving on localhost:"+strconv.Itoa(w.Ports[0].Port)+"\n"); n != 2 {
		t.Errorf("log holds %d 'serving on' lines, want 2 (one per run):\n%s", n, all)
	}
	if !strings.Contains(all, "request GET / from 127.0.0.1:") {
		t.Errorf("log has no request line:\n%s", all)
	}
	tail := d.mustCLI(t, "logs", "--tail", "1", "web")
	if lines := strings.Split(strings.TrimSuffix(tail, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "request GET / from") {
		t.Errorf("logs --tail 1 = %q, want the last request line alone", tail)
	}

	// Following sees what the workload writes after the follower started.
	f := startStream(t, d.socket, "logs", "-f", "web")
	f.waitLine(t, "the follower's first lines", func(l string) bool { return strings.HasPrefix(l, "serving on") })
	if _, err := httpGet(addr, "/after-follow"); err != nil {
		t.Fatal(err)
	}
	f.waitLine(t, "a line written after following began", func(l string) bool {
		return strings.HasPrefix(l, "request GET /after-follow ")
	})

	// Stop leaves nothing: no process, no zombie, the port free.
	if out := d.mustCLI(t, "stop", "web"); !strings.Contains(out, "web stopped") {
		t.Errorf("stop printed %q", out)
	}
	w3 := d.get(t, "web")
	if w3.State != api.StateStopped || w3.PID != 0 {
		t.Errorf("after stop: state %s pid %d", w3.State, w3.PID)
	}
	if w3.LastExit == nil || w3.LastExit.Code != 0 || w3.LastExit.Signal != "" {
		t.Errorf("after stop: last_exit %+v, want exit code 0 (serve exits 0 on SIGTERM)", w3.LastExit)
	}
	if err := reaped(w2.PID, d.pid()); err != nil {
		t.Error(err)
	}
	if left := processesUnder(d.dir); len(left) > 0 {
		t.Errorf("processes left after stop: %v", left)
	}
	if err := portFree(addr); err != nil {
		t.Errorf("port still held after stop: %v", err)
	}
	d.waitLog(t, "web", "got SIGTERM")

	// rm: gone from every view.
	d.mustCLI(t, "rm", "web")
	var ws []api.Workload
	decodeJSON(t, d.mustCLI(t, "ps", "--json"), &ws)
	if len(ws) != 0 {
		t.Errorf("ps --json after rm lists %+v", ws)
	}
	if _, errOut, code := runCLI(t, d.socket, "inspect", "web"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("inspect after rm: exit %d, stderr %q; want exit 1 naming not_found", code, errOut)
	}
}

// TestStopKillsWholeGroup checks that stop ends a run that ignores the stop
// signal, and every process of the run's process group.
func TestStopKillsWholeGroup(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	t.Run("ignores SIGTERM", func(t *testing.T) {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stubborn.yaml", `
name: stubborn
command: ["@PROG@", "ignore-term"]
stop: {timeout: 300ms}
`))
		w := d.get(t, "stubborn")
		d.waitLog(t, "stubborn", "ignoring SIGTERM") // SIGTERM is ignored from here
		d.mustCLI(t, "stop", "stubborn")
		w2 := d.get(t, "stubborn")
		if w2.State != api.StateStopped || w2.LastExit == nil || w2.LastExit.Signal != "SIGKILL" {
			t.Errorf("after stop: state %s, last_exit %+v; want stopped, killed by SIGKILL", w2.State, w2.LastExit)
		}
		if err := reaped(w.PID, d.pid()); err != nil {
			t.Error(err)
		}
	})

	t.Run("custom stop signal", func(t *testing.T) {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, "hup.yaml", `
name: hup
command: ["@PROG@", "signals"]
stop: {signal: hup, timeout: 300ms}
`))
		d.waitLog(t, "hup", "waiting for signals")
		d.mustCLI(t, "stop", "hup")
		if w := d.get(t, "hup"); w.State != api.StateStopped || w.LastExit == nil || w.LastExit.Signal != "SIGKILL" {
			t.Errorf("after stop: state %s, last_exit %+v; want stopped, killed by SIGKILL", w.State, w.LastExit)
		}
		if logs := d.logs(t, "hup"); !strings.Contains(logs, "got SIGHUP") || strings.Contains(logs, "got SIGTERM") {
			t.Errorf("log %q: want SIGHUP, the stop signal, and no SIGTERM", logs)
		}
	})

	t.Run("children in its process group", func(t *testing.T) {
		pidfile := filepath.Join(d.dir, "family.pids")
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, "family.yaml", `
name: family
command: ["@PROG@", "spawn-group", "3", "`+pidfile+`"]
stop: {timeout: 5s}
`))
		w := d.get(t, "family")
		children := readPids(t, pidfile)
		d.waitLog(t, "family", "spawned 3 children")
		for _, c := range children {
			ps, ok := readProc(c)
			if !ok || ps.pgrp != w.PID {
				t.Fatalf("child %d: %+v, want a live process in group %d", c, ps, w.PID)
			}
		}
		// The leader exits on SIGTERM at once; its children ignore SIGTERM
		// and would live on if stop only waited for the leader.
		d.mustCLI(t, "stop", "family")
		w2 := d.get(t, "family")
		if w2.State != api.StateStopped || w2.LastExit == nil || w2.LastExit.Code != 0 {
			t.Errorf("after stop: state %s, last_exit %+v; want stopped with exit code 0", w2.State, w2.LastExit)
		}
		for _, c := range children {
			eventually(t, fmt.Sprintf("child %d killed", c), func() error {
				if alive(c) {
					return fmt.Errorf("pid %d still runs", c)
				}
				return nil
			})
		}
		if left := processesUnder(d.dir); len(left) > 0 {
			t.Errorf("processes left after stop: %v", left)
		}
	})
}

// TestStopKillsEscapedSession is stop's promise for a child that left the
// run's session: only the cgroup can find it.
func TestStopKillsEscapedSession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	pidfile := filepath.Join(d.dir, "escapee.pid")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "escape.yaml", `
name: escape
command: ["@PROG@", "spawn-escapee", "`+pidfile+`"]
stop: {timeout: 1s}
`))
	escapee := readPids(t, pidfile)[0]
	if ps, ok := readProc(escapee); !ok || ps.pgrp != escapee {
		t.Fatalf("escapee %d did not start its own session: %+v", escapee, ps)
	}
	d.mustCLI(t, "stop", "escape")
	eventually(t, "the escapee killed", func() error {
		if alive(escapee) {
			return fmt.Errorf("pid %d still runs", escapee)
		}
		return nil
	})
}

// TestSignalVerb: `flyd signal NAME... SIGNAL` and `--all`, with the other
// verbs' exit codes: 1 when a name is unknown, 2 for a bad signal.
func TestSignalVerb(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, n := range []string{"sig-a", "sig-b"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, n+".yaml", "name: "+n+"\ncommand: [\"@PROG@\", \"signals\"]\n"))
		d.waitLog(t, n, "waiting for signals")
	}
	if out := d.mustCLI(t, "signal", "sig-a", "HUP"); out != "sig-a signalled\n" {
		t.Errorf("flyd signal sig-a HUP printed %q", out)
	}
	d.waitLog(t, "sig-a", "got SIGHUP")
	d.mustCLI(t, "signal", "--all", "SIGUSR1")
	for _, n := range []string{"sig-a", "sig-b"} {
		d.waitLog(t, n, "got SIGUSR1")
		if w := d.get(t, n); w.State != api.StateRunning {
			t.Errorf("%s is %s after signals it handles", n, w.State)
		}
	}
	if strings.Contains(d.logs(t, "sig-b"), "SIGHUP") {
		t.Error("sig-b got the SIGHUP meant for sig-a")
	}
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"signal", "sig-a", "nope", "HUP"}, 1, `no workload named "nope" (not_found)`},
		{[]string{"signal", "sig-a", "SIGBOGUS"}, 2, "unknown signal"},
		{[]string{"signal", "HUP"}, 2, "--all"},
		{[]string{"signal", "--all", "sig-a", "HUP"}, 2, "cannot be used together"},
	} {
		_, errOut, code := runCLI(t, d.socket, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) {
			t.Errorf("flyd %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.msg)
		}
	}
}

// TestStopForceOvertakes: `flyd stop --force` kills a workload whose stop
// is waiting out a long grace period, and the waiting stop returns too.
func TestStopForceOvertakes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stubborn.yaml", `
name: stubborn
command: ["@PROG@", "ignore-term"]
stop: {timeout: 1h}
`))
	w := d.get(t, "stubborn")
	d.waitLog(t, "stubborn", "ignoring SIGTERM")
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitFor)
	defer cancel()
	slow := cliCmd(ctx, d.socket, "stop", "stubborn")
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	d.waitState(t, "stubborn", api.StateStopping)
	if out := d.mustCLI(t, "stop", "--force", "stubborn"); out != "stubborn stopped\n" {
		t.Errorf("stop --force printed %q", out)
	}
	if err := slow.Wait(); err != nil {
		t.Errorf("the overtaken stop: %v", err)
	}
	if err := reaped(w.PID, d.pid()); err != nil {
		t.Error(err)
	}
}

// TestReload: `flyd reload` sends the spec's reload signal to the main
// process, or runs its reload command, without a restart, and says so in
// an event; a workload without a reload is refused.
func TestReload(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	marker := filepath.Join(d.dir, "reloaded")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "r.yaml", `
name: hup
command: ["@PROG@", "signals"]
reload: {signal: HUP}
---
name: cmd
command: ["@PROG@", "signals"]
reload: {exec: ["/bin/sh", "-c", "echo $FLYD_WORKLOAD > `+marker+`"]}
---
name: none
command: ["@PROG@", "signals"]
`))
	for _, n := range []string{"hup", "cmd", "none"} {
		d.waitLog(t, n, "waiting for signals")
	}
	pid := d.get(t, "hup").PID
	if out := d.mustCLI(t, "reload", "hup", "cmd"); out != "hup reloaded\ncmd reloaded\n" {
		t.Errorf("reload printed %q", out)
	}
	d.waitLog(t, "hup", "got SIGHUP")
	if w := d.get(t, "hup"); w.PID != pid || w.Restarts != 0 {
		t.Errorf("reload restarted hup: pid %d→%d, restarts %d", pid, w.PID, w.Restarts)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "cmd\n" {
		t.Errorf("the reload command: %q, %v", b, err)
	}
	if _, errOut, code := runCLI(t, d.socket, "reload", "none"); code != 1 || !strings.Contains(errOut, "has no reload in its spec") {
		t.Errorf("reload of a workload without one: exit %d, %s", code, errOut)
	}
}
