package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestOneShotsAcrossRestarts: a one-shot that completed stays completed,
// with everything `inspect` shows of it, when the same file is applied
// again and across a daemon restart: what waits for it to complete still
// starts, a changed dependent applies, and a failed workload keeps why.
func TestOneShotsAcrossRestarts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "stack.yaml", `
name: initdb
command: ["sh", "-c", "echo initialized"]
restart: {policy: never}
---
name: db
command: ["@PROG@", "signals"]
after: ["initdb:completed"]
`)
	d.mustCLI(t, "apply", "-f", file)
	runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "broken.yaml", "name: broken\ncommand: [sh, -c, \"exit 3\"]\nrestart: {policy: never}\n"))
	initdb := d.waitState(t, "initdb", api.StateExited)
	db := d.waitState(t, "db", api.StateRunning)
	broken := d.waitState(t, "broken", api.StateExited)
	if initdb.LastExit == nil || initdb.LastExit.Code != 0 {
		t.Fatalf("initdb: %+v", initdb.LastExit)
	}
	runs := func(d *daemon) int { return strings.Count(d.mustCLI(t, "logs", "initdb"), "initialized") }

	// The same file again: nothing changes, the one-shot is not run again.
	d.mustCLI(t, "apply", "-f", file)
	if again := d.get(t, "initdb"); again.State != api.StateExited || !again.LastExit.At.Equal(initdb.LastExit.At) || runs(d) != 1 {
		t.Errorf("initdb after the same file again: %s, exit at %v (was %v), ran %d times; want completed, once", again.State, again.LastExit.At, initdb.LastExit.At, runs(d))
	}

	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	for _, was := range []*api.Workload{initdb, broken} {
		w := d.waitState(t, was.Name, api.StateExited)
		if w.LastExit == nil || w.LastExit.Code != was.LastExit.Code || !w.LastExit.At.Equal(was.LastExit.At) || w.Reason != was.Reason {
			t.Errorf("%s after a daemon restart: exit %+v at %v reason %q; want %+v at %v, %q", was.Name, w.LastExit, w.LastExit.At, w.Reason, was.LastExit, was.LastExit.At, was.Reason)
		}
	}
	if w := d.waitState(t, "db", api.StateRunning); w.PID != db.PID {
		t.Errorf("db after a daemon restart: pid %d, want %d adopted", w.PID, db.PID)
	}
	// A changed dependent still finds its one-shot complete.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "db.yaml", "name: db\ncommand: [\"@PROG@\", signals]\nafter: [\"initdb:completed\"]\nenv: {CHANGED: \"1\"}\n"))
	if w := d.waitState(t, "db", api.StateRunning); w.PID == db.PID {
		t.Error("the changed db was not replaced")
	}
	if runs(d) != 1 {
		t.Errorf("initdb ran %d times; want once", runs(d))
	}
	// start runs it again, on purpose.
	d.mustCLI(t, "start", "initdb")
	eventually(t, "initdb run again", func() error {
		if n := runs(d); n != 2 {
			return fmt.Errorf("ran %d times", n)
		}
		return nil
	})
}

// TestNetworkDocumentsEndWithRm: a network's document stays while its
// settings matter and goes with `networks rm` whether or not the network
// still has a namespace; `networks` lists a document without workloads;
// every document applied or removed is an event.
func TestNetworkDocumentsEndWithRm(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "zz.yaml", "kind: network\nname: svc-zz\negress: false\n---\nname: zz\ncommand: [\"@PROG@\", signals]\nnetwork: svc-zz\n"))
	d.waitState(t, "zz", api.StateRunning)
	d.mustCLI(t, "rm", "zz")
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || nets[0].Name != "svc-zz" || nets[0].Egress || len(nets[0].Workloads) != 0 {
		t.Errorf("networks after the last workload went: %+v; want svc-zz's document, egress off, no workloads", nets)
	}
	d.mustCLI(t, "networks", "rm", "svc-zz")
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 0 {
		t.Errorf("networks after networks rm: %+v; want none", nets)
	}
	if b, _ := os.ReadFile(filepath.Join(d.stateDir, "networks.json")); strings.Contains(string(b), "svc-zz") {
		t.Errorf("networks.json still holds svc-zz: %s", b)
	}
	if _, errOut, code := runCLI(t, d.socket, "networks", "rm", "svc-zz"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("networks rm of nothing: exit %d, %s; want not_found", code, errOut)
	}
	// A later network of the name has the defaults again.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "zz2.yaml", "name: zz\ncommand: [\"@PROG@\", signals]\nnetwork: svc-zz\n"))
	d.waitState(t, "zz", api.StateRunning)
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || !nets[0].Egress {
		t.Errorf("a new svc-zz: %+v; want egress on, the default", nets)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "p.yaml", "kind: policy\nname: quiet\nselect: {networks: [svc-zz]}\ningress: []\n"))
	d.mustCLI(t, "policies", "rm", "quiet")
	eventually(t, "document events kept", func() error {
		b, _ := os.ReadFile(filepath.Join(d.stateDir, "events.log"))
		for _, want := range []string{"network svc-zz applied (egress false", "network svc-zz removed", "policy quiet applied", "policy quiet removed"} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no event %q in %s", want, b)
			}
		}
		return nil
	})
}
