package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestTrustPeerDependentHoldsNoRootStop (issue 49, Medium): a peer's
// workload that uses root's rdb2 and ignores SIGTERM for a grace of 40 s
// does not hold root's `stop --all`: root's workloads stop at once, in
// their own order (rapp, which uses rdb2, before it), while the peer's
// grace runs on; the batch answers once the peer's workload is stopped
// too (here cut short by root's `stop --force`).
func TestTrustPeerDependentHoldsNoRootStop(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "root.yaml", `
name: rdb2
command: ["@PROG@", "signals"]
endpoints: [{name: tcp, api: tcp, port: ephemeral}]
---
name: rapp
command: ["@PROG@", "signals"]
uses: [rdb2]
`))
	if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "pdep.yaml",
		"name: pdep\ncommand: [\"@PROG@\", ignore-term]\nuses: [rdb2]\nstop: {timeout: 40s}\n")); code != 0 {
		t.Fatalf("the peer's apply: exit %d, %s", code, errOut)
	}
	for _, n := range []string{"rdb2", "rapp", "pdep"} {
		d.waitState(t, n, api.StateRunning)
	}
	d.waitLog(t, "pdep", "ignoring SIGTERM")

	began := time.Now()
	stop := startStream(t, d.socket, "stop", "--all")
	var rdb2, rapp *api.Workload
	eventually(t, "root's workloads stopped", func() error {
		rdb2, rapp = d.get(t, "rdb2"), d.get(t, "rapp")
		if rdb2.State != api.StateStopped || rapp.State != api.StateStopped {
			return fmt.Errorf("rdb2 %s, rapp %s", rdb2.State, rapp.State)
		}
		return nil
	})
	took := time.Since(began)
	t.Logf("root's workloads stopped %v after stop --all began", took.Round(time.Millisecond))
	if took > 10*time.Second || rdb2.LastExit == nil || rdb2.LastExit.At.Sub(began) > 10*time.Second {
		t.Errorf("root's rdb2 stopped %v after stop --all (exit %+v); want well within the peer's 40 s grace", took, rdb2.LastExit)
	}
	// Root's own order holds: its dependent first.
	if rapp.LastExit == nil || rdb2.LastExit == nil || rapp.LastExit.At.After(rdb2.LastExit.At) {
		t.Errorf("rapp exited %+v, rdb2 %+v; want rapp, which uses rdb2, first", rapp.LastExit, rdb2.LastExit)
	}
	// The peer's grace runs on, and the batch waits for it.
	if w := d.get(t, "pdep"); w.State != api.StateStopping {
		t.Errorf("the peer's pdep is %s; want stopping, in its grace", w.State)
	}
	select {
	case <-stop.done:
		t.Fatalf("stop --all answered before the peer's pdep was stopped: %q", stop.lines())
	default:
	}
	d.mustCLI(t, "stop", "--force", "pdep")
	select {
	case <-stop.done:
	case <-time.After(waitFor):
		t.Fatalf("stop --all still waits after the peer's pdep was killed: %q", stop.lines())
	}
	if out := strings.Join(stop.lines(), "\n"); !strings.Contains(out, "rdb2") || !strings.Contains(out, "rapp") || !strings.Contains(out, "pdep") {
		t.Errorf("stop --all printed %q; want all three", out)
	}
	if w := d.get(t, "pdep"); w.State != api.StateStopped {
		t.Errorf("the peer's pdep after root's stop --force: %s", w.State)
	}
}
