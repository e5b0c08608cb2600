package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestMemoryLimitKills: a workload that outgrows memory_max is killed, and
// its state says it was the limit.
func TestMemoryLimitKills(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "hog.yaml", `
name: hog
command: ["@PROG@", "hog"]
resources: {memory_max: 64Mi}
restart: {policy: never}
`))
	w := d.waitState(t, "hog", api.StateExited)
	if w.LastExit == nil || w.LastExit.Signal != "SIGKILL" || !strings.Contains(w.LastExit.Reason, "memory") {
		t.Fatalf("last exit %+v, want SIGKILL by the memory limit", w.LastExit)
	}
	if out := d.mustCLI(t, "ps"); !strings.Contains(out, "memory limit") {
		t.Errorf("ps does not say why:\n%s", out)
	}
}

// TestForkBombContained: under pids_max the workload never holds more
// processes than the limit, and stop ends all of them.
func TestForkBombContained(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "bomb.yaml", `
name: bomb
command: ["@PROG@", "forkbomb"]
resources: {pids_max: 32}
stop: {timeout: 1s}
`))
	d.waitLog(t, "bomb", "refused")
	if n := len(processesUnder(d.dir)); n > 32 {
		t.Fatalf("%d processes, over pids_max 32", n)
	}
	if _, err := d.client.Status(t.Context()); err != nil {
		t.Fatalf("the daemon suffers from the bomb: %v", err)
	}
	d.mustCLI(t, "stop", "bomb")
	if left := processesUnder(d.dir); len(left) > 0 {
		t.Fatalf("processes left after stop: %v", left)
	}
}

// TestReusedPidIsNotAdopted: a run record whose pid now belongs to an
// unrelated process (a pid reused while no daemon ran) is neither adopted
// nor killed; the workload is restarted by its policy.
func TestReusedPidIsNotAdopted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "victim.yaml", "name: victim\ncommand: [\"@PROG@\", \"print\", \"1\"]\n"))
	before := d.waitState(t, "victim", api.StateRunning)
	d.kill(t)
	// The workload dies while no daemon runs, and its pid goes to a stranger.
	if err := syscallKill(before.PID); err != nil {
		t.Fatal(err)
	}
	stranger := exec.Command("sleep", "60")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stranger.Process.Kill(); _ = stranger.Wait() }()
	record := filepath.Join(d.dir, "run", "workloads", "victim.json")
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["process"].(map[string]any)["pid"] = stranger.Process.Pid
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, b, 0o600); err != nil {
		t.Fatal(err)
	}

	d2 := startDaemon(t, inDir(d.dir))
	after := d2.waitWorkload(t, "victim", "restarted with a pid of its own", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.PID != stranger.Process.Pid && w.PID != before.PID
	})
	if after.LastExit == nil || !after.LastExit.Unknown {
		t.Errorf("last exit %+v, want unknown", after.LastExit)
	}
	if !alive(stranger.Process.Pid) {
		t.Fatal("the daemon killed a process that was not its workload")
	}
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return nil
}

// TestLeftoversOfADeadRunAreKilled: a run dies while no daemon watches and
// leaves a child in its own session behind; the next daemon kills that
// child before it restarts the workload.
func TestLeftoversOfADeadRunAreKilled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	pidfile := filepath.Join(d.dir, "escapee.pid")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "esc.yaml", "name: esc\ncommand: [\"@PROG@\", \"spawn-escapee\", \""+pidfile+"\"]\n"))
	first := d.waitState(t, "esc", api.StateRunning)
	escapee := readPids(t, pidfile)[0]
	d.kill(t)
	if err := syscallKill(first.PID); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(pidfile)
	d2 := startDaemon(t, inDir(d.dir))
	d2.waitWorkload(t, "esc", "restarted", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.PID != first.PID
	})
	eventually(t, "the old run's escapee killed", func() error {
		if alive(escapee) {
			return fmt.Errorf("pid %d still runs", escapee)
		}
		return nil
	})
}

// TestAdoptedRunEndsWhole: when the main process of an adopted run dies,
// nothing of that run is left when the next one starts, its pid included:
// a master that guards its data with a pid file (postgres) starts on the
// first restart instead of meeting its predecessor's zombie.
func TestAdoptedRunEndsWhole(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	lock := filepath.Join(d.dir, "master.pid")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "master.yaml", `
name: master
command: ["@PROG@", "pidlock", "`+lock+`"]
restart: {policy: on-failure, max_restarts: 5, backoff: {initial: 100ms, max: 1s}}
`))
	first := d.waitState(t, "master", api.StateRunning)
	d.waitLog(t, "master", "holding the lock")
	d.terminate(t)
	d2 := startDaemon(t, inDir(d.dir))
	if w := d2.waitState(t, "master", api.StateRunning); w.PID != first.PID {
		t.Fatalf("pid %d after the daemon restart, want %d adopted", w.PID, first.PID)
	}
	children := processesUnder(d.dir)
	if err := syscallKill(first.PID); err != nil {
		t.Fatal(err)
	}
	w := d2.waitWorkload(t, "master", "restarted", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.PID != first.PID && w.Restarts > 0
	})
	if w.Restarts != 1 {
		t.Errorf("%d restarts for one crash, want 1", w.Restarts)
	}
	if logs := d2.logs(t, "master"); strings.Contains(logs, "already exists") {
		t.Errorf("a restart met the old run:\n%s", logs)
	}
	for _, p := range children {
		if p != w.PID && alive(p) {
			if ps, ok := readProc(p); ok && ps.pgrp == first.PID {
				t.Errorf("process %d of the old run survived it", p)
			}
		}
	}
}

// TestLimitHitsSeen: a child killed by the memory limit while the main
// process runs on, and forks refused by the pids limit, are events,
// counts in the workload's state and metrics; the workload stays running.
func TestLimitHitsSeen(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "l.yaml", `
name: leaky
command: ["sh", "-c", "@PROG@ hog > /dev/null; echo the-hog-died; exec @PROG@ signals"]
resources: {memory_max: 64Mi}
---
name: forky
command: ["sh", "-c", "@PROG@ forkbomb > /dev/null & exec sleep 300"]  # sleep needs no threads the bomb could take
resources: {pids_max: 16}
`))
	d.waitLog(t, "leaky", "the-hog-died")
	w := d.waitWorkload(t, "leaky", "its OOM kill counted", func(w *api.Workload) bool {
		return w.LimitHits != nil && w.LimitHits.OOMKills > 0
	})
	if w.State != api.StateRunning || w.LimitHits.LastOOMKill == nil {
		t.Errorf("leaky after its child's OOM kill: %s, %+v", w.State, w.LimitHits)
	}
	f := d.waitWorkload(t, "forky", "its refused forks counted", func(w *api.Workload) bool {
		return w.LimitHits != nil && w.LimitHits.PidsRefusals > 0
	})
	if f.State != api.StateRunning {
		t.Errorf("forky is %s", f.State)
	}
	m := d.metrics(t)
	for _, want := range []string{`flyd_workload_oom_kills_total{workload="leaky"}`, `flyd_workload_pids_refusals_total{workload="forky"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	_ = d.mustCLI(t, "stop", "forky", "leaky")
}
