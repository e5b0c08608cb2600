package integration

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/instance"
)

// TestDaemonRestartAdopts restarts the daemon under a running workload: a
// clean exit and a crash, with the workload alive or dead meanwhile.
func TestDaemonRestartAdopts(t *testing.T) {
	t.Parallel()
	d1 := startDaemon(t)
	file, addr := serveWorkload(t, d1, "web.yaml")
	d1.mustCLI(t, "apply", "-f", file)
	w := d1.get(t, "web")
	waitServing(t, addr, w.PID)
	// Two workloads at rest, for two reasons.
	d1.mustCLI(t, "apply", "-f", d1.writeSpec(t, "parked.yaml", "name: parked\ncommand: [\"@PROG@\", print, \"1\"]\n"))
	d1.mustCLI(t, "stop", "parked")
	d1.writeSpec(t, "broken.yaml", "name: broken\ncommand: [/nonexistent/prog]\n")
	runCLI(t, d1.socket, "apply", "-f", filepath.Join(d1.dir, "broken.yaml"))
	brokenErr := d1.waitState(t, "broken", api.StateFailed).LastError

	// A daemon that exits leaves its workloads running...
	d1.terminate(t)
	if !alive(w.PID) {
		t.Fatalf("pid %d died with the daemon", w.PID)
	}
	waitServing(t, addr, w.PID)

	// ...and the next one adopts them: same pid, no restart.
	d2 := startDaemon(t, inDir(d1.dir))
	adopted := d2.waitState(t, "web", api.StateRunning)
	if adopted.PID != w.PID || adopted.Restarts != 0 {
		t.Fatalf("after a daemon restart: pid %d restarts %d, want the same pid %d, no restart", adopted.PID, adopted.Restarts, w.PID)
	}
	// SINCE is when the run started, read back from the run record.
	if !adopted.Since.Equal(*w.StartedAt) || !adopted.StartedAt.Equal(*w.StartedAt) {
		t.Errorf("adopted: since %s, started_at %v; want both %s, the run's start", adopted.Since, adopted.StartedAt, w.StartedAt)
	}
	var ps []api.Workload
	decodeJSON(t, d2.mustCLI(t, "ps", "--json"), &ps)
	if len(ps) != 3 || ps[2].Name != "web" || ps[2].PID != w.PID || ps[2].State != api.StateRunning {
		t.Errorf("ps --json: %+v, want web running as pid %d", ps, w.PID)
	}
	// What was at rest stays at rest, for the same reason.
	if p := d2.waitState(t, "parked", api.StateStopped); p.PID != 0 {
		t.Errorf("parked came back with pid %d, want stopped", p.PID)
	}
	if b := d2.waitState(t, "broken", api.StateFailed); b.LastError != brokenErr || b.PID != 0 {
		t.Errorf("broken came back with pid %d, last_error %q; want failed with %q", b.PID, b.LastError, brokenErr)
	}
	// Its output still reaches its log, which the new daemon serves.
	if _, err := httpGet(addr, "/after-adoption"); err != nil {
		t.Fatal(err)
	}
	d2.waitLog(t, "web", "request GET /after-adoption ")
	// Applying the same spec again changes nothing, even though this daemon
	// read it back from disk.
	d2.mustCLI(t, "apply", "-f", file)
	if w := d2.get(t, "web"); w.PID != adopted.PID || w.Restarts != 0 {
		t.Errorf("re-applying an unchanged spec to the adopting daemon: pid %d (was %d), restarts %d", w.PID, adopted.PID, w.Restarts)
	}
	// An adopted run is watched like any other.
	_ = syscall.Kill(w.PID, syscall.SIGKILL)
	w2 := d2.waitWorkload(t, "web", "adopted run restarted", func(v *api.Workload) bool {
		return v.State == api.StateRunning && v.PID > 0 && v.PID != w.PID
	})
	if w2.Restarts != 1 || w2.LastExit == nil || !w2.LastExit.Unknown {
		t.Errorf("after the adopted run died: restarts %d, last_exit %+v; want 1 restart, exit status unknown", w2.Restarts, w2.LastExit)
	}
	waitServing(t, addr, w2.PID)

	// A crashed daemon, and a workload that dies while no daemon watches:
	// the next daemon restarts it by policy.
	d2.kill(t)
	if err := syscall.Kill(w2.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the workload dead", func() error {
		if alive(w2.PID) {
			return fmt.Errorf("pid %d still runs", w2.PID)
		}
		return nil
	})
	d3 := startDaemon(t, inDir(d1.dir))
	w3 := d3.waitWorkload(t, "web", "restarted by policy", func(v *api.Workload) bool {
		return v.State == api.StateRunning && v.PID > 0 && v.PID != w2.PID
	})
	if w3.LastExit == nil || !w3.LastExit.Unknown || w3.Restarts != w2.Restarts+1 {
		t.Errorf("after dying unwatched: last_exit %+v restarts %d; want unknown exit status, %d restarts", w3.LastExit, w3.Restarts, w2.Restarts+1)
	}
	waitServing(t, addr, w3.PID)

	// With --stop-workloads-on-exit, nothing outlives the daemon.
	d3.terminate(t)
	d4 := startDaemon(t, inDir(d1.dir), withArgs("--stop-workloads-on-exit"))
	if w4 := d4.waitState(t, "web", api.StateRunning); w4.PID != w3.PID {
		t.Fatalf("pid %d, want %d adopted", w4.PID, w3.PID)
	}
	d4.terminate(t)
	eventually(t, "no process left", func() error {
		if left := processesUnder(d1.dir); len(left) > 0 {
			return fmt.Errorf("still running: %v", left)
		}
		return portFree(addr)
	})
	// The stopped workloads still hold their ports, and their rules: a
	// last daemon removes them, and so everything of the test.
	startDaemon(t, inDir(d1.dir))
}

// TestSocketAndAccess covers the socket's life and who may use it.
func TestSocketAndAccess(t *testing.T) {
	t.Parallel()
	d1 := startDaemon(t)
	d1.kill(t)
	if _, err := os.Stat(d1.socket); err != nil {
		t.Fatalf("a SIGKILLed daemon should have left its socket: %v", err)
	}
	if _, errOut, code := runCLI(t, d1.socket, "ps"); code != 1 || !strings.Contains(errOut, "no flyd daemon answers") {
		t.Errorf("ps with no daemon: exit %d, stderr %q; want 1, no flyd daemon answers", code, errOut)
	}
	d := startDaemon(t, inDir(d1.dir)) // over the stale socket
	if !strings.Contains(d.log(), "removed a stale socket") {
		t.Errorf("the daemon did not report the stale socket it replaced:\n%s", d.log())
	}

	for what, args := range map[string][]string{
		"same socket":    {"--socket", d.socket, "--state-dir", filepath.Join(d.dir, "other-state"), "--run-dir", filepath.Join(d.dir, "other-run")},
		"same state dir": {"--socket", filepath.Join(d.dir, "other.sock"), "--state-dir", d.stateDir, "--run-dir", filepath.Join(d.dir, "other-run")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		cmd := cliCmd(ctx, d.socket, append([]string{"daemon"}, args...)...)
		_, errOut, code := runCmd(t, cmd)
		cancel()
		if code != 1 || !strings.Contains(errOut, "another flyd daemon") {
			t.Errorf("a second daemon on the %s: exit %d, stderr %q; want 1, another flyd daemon", what, code, errOut)
		}
	}
	if _, err := d.client.Status(context.Background()); err != nil {
		t.Fatalf("the first daemon no longer answers after a second one was refused: %v", err)
	}

	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	want := os.FileMode(0o600)
	if _, err := user.LookupGroup("flyd"); err == nil {
		want = 0o660
	}
	if fi.Mode().Perm() != want || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want a socket with %v", fi.Mode(), want)
	}

	// Reaching the socket is not enough: the peer's credentials decide.
	if err := os.Chmod(d.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "mine.yaml", "name: mine\ncommand: [\"@PROG@\", print, \"1\"]\n"))
	other := d.writeSpec(t, "theirs.yaml", "name: theirs\ncommand: [\"@PROG@\", print, \"1\"]\n")
	for _, args := range [][]string{{"ps"}, {"apply", "-f", other}, {"rm", "mine"}, {"logs", "mine"}} {
		out, errOut, code := runAs(t, d.socket, 65534, 65534, nil, args...)
		if code != 1 || !strings.Contains(errOut, "forbidden") || strings.Contains(out, "mine") {
			t.Errorf("%s as nobody: exit %d, stdout %q, stderr %q; want 1, forbidden, nothing else", args[0], code, out, errOut)
		}
	}
	if ws, err := d.client.List(context.Background()); err != nil || len(ws) != 1 || ws[0].Name != "mine" || ws[0].State != api.StateRunning {
		t.Errorf("after refused requests: %+v %v; want mine alone, running", ws, err)
	}

	t.Run("socket group", func(t *testing.T) {
		gid := usersGroup(t)
		d := startDaemon(t, withArgs("--socket-group", "users"))
		fi, err := os.Stat(d.socket)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
			t.Errorf("socket mode %v group %d, want 0660 group %d", fi.Mode().Perm(), st.Gid, gid)
		}
		if out, errOut, code := runAs(t, d.socket, 65534, 65534, []uint32{uint32(gid)}, "ps"); code != 0 || !strings.Contains(out, "NAME") {
			t.Errorf("ps as nobody in group users: exit %d, stdout %q, stderr %q; want served", code, out, errOut)
		}
		if _, errOut, code := runAs(t, d.socket, 65534, uint32(gid), nil, "ps"); code != 0 {
			t.Errorf("ps as nobody with primary group users: exit %d, stderr %q; want served", code, errOut)
		}
		if _, errOut, code := runAs(t, d.socket, 65534, 65534, nil, "ps"); code != 1 || !strings.Contains(errOut, "forbidden") || !strings.Contains(errOut, "root or group users is needed") {
			t.Errorf("ps as nobody outside group users: exit %d, stderr %q; want 1, forbidden, naming the socket's group", code, errOut)
		}
		// Even with the socket open to all, membership is checked.
		if err := os.Chmod(d.socket, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := runAs(t, d.socket, 65534, 65534, nil, "ps"); code != 1 || !strings.Contains(errOut, "forbidden") {
			t.Errorf("ps as nobody outside group users, socket 0666: exit %d, stderr %q; want 1, forbidden", code, errOut)
		}
	})
}

// runAs runs the CLI with other credentials.
func runAs(t *testing.T, socket string, uid, gid uint32, groups []uint32, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cmd := cliCmd(ctx, socket, args...)
	cmd.Dir = "/"
	if groups == nil {
		groups = []uint32{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	return runCmd(t, cmd)
}

// TestDaemonsSideBySide: two daemons with the default names for what they
// make on the host (cgroup parent, registry port, table), apart only in
// their paths, each running a workload named web: restarting either, or
// killing it with -9, leaves the other's workload alone, with its pid.
func TestDaemonsSideBySide(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	defaults := withArgs("--cgroup-parent", "", "--registry-listen", "")
	ds := []*daemon{startDaemon(t, defaults), startDaemon(t, defaults)}
	pids := make([]int, 2)
	for i, d := range ds {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, "web.yaml", "name: web\ncommand: [\"@PROG@\", signals]\n"))
		pids[i] = d.waitState(t, "web", api.StateRunning).PID
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pids[i]))
		// Each daemon's own: its parent from the hierarchy's root, or,
		// where systemd runs the host on cgroup v2, its scope.
		inst := instance.Name(d.runDir)
		if err != nil || !strings.Contains(string(b), ":/"+inst+"/web\n") && !strings.Contains(string(b), ":/flyd.slice/"+inst+"-workloads.scope/web\n") {
			t.Fatalf("daemon %d's web is in %s (%v), want /%s/web or its scope's", i, b, err, inst)
		}
	}
	check := func(when string) {
		t.Helper()
		for i, d := range ds {
			w := d.waitState(t, "web", api.StateRunning)
			if w.PID != pids[i] || w.Restarts != 0 || !alive(pids[i]) {
				t.Fatalf("%s: daemon %d's web has pid %d, restarts %d; want pid %d, alive, never restarted", when, i, w.PID, w.Restarts, pids[i])
			}
		}
	}
	for i := range ds {
		ds[i].terminate(t)
		ds[i] = startDaemon(t, inDir(ds[i].dir), defaults)
		check(fmt.Sprintf("after daemon %d's restart", i))
		ds[i].kill(t)
		ds[i] = startDaemon(t, inDir(ds[i].dir), defaults)
		check(fmt.Sprintf("after daemon %d was killed and started again", i))
	}
}
