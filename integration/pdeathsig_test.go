package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestDaemonDiesWithItsParent: `flyd daemon` started with a parent-death
// signal keeps it once it has exec'd the daemon program, as a supervisor
// of its own (a CI job, a benchmark) expects: its parent is killed, and
// the daemon is told to stop.
func TestDaemonDiesWithItsParent(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "flyd.sock")
	parent := exec.Command(progBin, "parent", flydBin, "daemon", "--socket", socket, "--state-dir", filepath.Join(dir, "state"),
		"--run-dir", filepath.Join(dir, "run"), "--registry", "off", "--network-pool", "off", "--cgroup-parent", cgroupParent(dir),
		"--workloads-dir", filepath.Join(dir, "workloads.d"))
	parent.Env = append(cleanEnv(), "FLYD_HOME="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(socket)
	var pid int
	eventually(t, "the daemon answering", func() error {
		st, err := c.Status(t.Context())
		if err == nil {
			pid = st.PID
		}
		return err
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	_ = parent.Process.Kill()
	_ = parent.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the daemon still runs 30 s after its parent was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("its socket is left: %v", err)
	}
}
