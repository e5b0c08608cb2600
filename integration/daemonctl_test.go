package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// log is the daemon's JSON log so far.
func (d *daemon) log() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// terminate sends SIGTERM and waits for the daemon to exit; it must exit 0.
func (d *daemon) terminate(t *testing.T) {
	t.Helper()
	d.signalAndWait(t, syscall.SIGTERM)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("flyd daemon exited %d after SIGTERM, want 0", code)
	}
}

// kill SIGKILLs the daemon, as a crash would end it.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	d.signalAndWait(t, syscall.SIGKILL)
}

func (d *daemon) signalAndWait(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.stop(sig); err != nil {
		t.Fatal(err)
	}
}

// stop signals the daemon and waits for it to exit, SIGKILLing it if it
// does not.
func (d *daemon) stop(sig syscall.Signal) error {
	if !d.running() {
		return fmt.Errorf("flyd daemon already exited (%v)", d.cmd.ProcessState)
	}
	defer d.client.Close()
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
		return nil
	case <-time.After(2 * waitFor):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("flyd daemon did not exit within %s of %s", 2*waitFor, sig)
	}
}

// cleanup removes every workload through the API, stops the daemon, and
// checks with /proc that nothing of the test's workloads still runs.
func (d *daemon) cleanup() {
	t := d.t
	wasRunning := d.running()
	if wasRunning {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
		ws, err := d.client.List(ctx)
		if err != nil {
			t.Errorf("cleanup: listing workloads: %v", err)
		}
		for _, w := range ws {
			if err := d.client.Remove(ctx, w.Name, api.RemoveOptions{Force: true}); err != nil {
				t.Errorf("cleanup: removing %s: %v", w.Name, err)
			}
		}
		cancel()
		// Not terminate: a failure here must not skip the checks below.
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Error(err)
		} else if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("flyd daemon exited %d after SIGTERM, want 0", code)
		}
	}
	d.client.Close()
	if strings.Contains(d.log(), "WARNING: DATA RACE") {
		t.Error("the race detector found a data race in the daemon (FLYD_TEST_RACE=1)")
	}
	if t.Failed() {
		t.Logf("flyd daemon log %s:\n%s", d.logPath, d.log())
	}
	// A process of this test still running is flyd's failure only when a
	// daemon was there to stop it; either way none may outlive the test.
	if left := processesUnder(d.dir); len(left) > 0 {
		t.Errorf("processes of this test's workloads still running after cleanup: %v", left)
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	d.checkAndRemoveCgroups(wasRunning)
	if d.cmd.ProcessState != nil && !d.cmd.ProcessState.Exited() {
		// SIGKILLed on purpose: its socket stays, t.TempDir removes it.
		return
	}
	if _, err := os.Stat(d.socket); err == nil && !d.running() && !anotherDaemonRuns(d) {
		t.Errorf("socket %s left behind by a daemon that exited cleanly", d.socket)
	}
}

// anotherDaemonRuns reports whether a later daemon serves the same socket,
// which happens to a daemon started with inDir.
func anotherDaemonRuns(d *daemon) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c := api.NewClient(d.socket)
	defer c.Close()
	_, err := c.Status(ctx)
	return err == nil
}
