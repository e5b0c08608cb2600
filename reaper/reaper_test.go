package reaper

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOrphansReapedSpawnedChildrenKept: an orphan re-parented to this
// process is reaped, and a child started through Spawn keeps its status
// for its own Wait.
func TestOrphansReapedSpawnedChildrenKept(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Become(ctx); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "orphan")
	// The orphan's parent exits at once; the orphan lives 0.2 s more, then
	// must not stay a zombie of ours.
	cmd := exec.Command("sh", "-c", "setsid sh -c 'echo $$ > "+pidfile+"; sleep 0.2' & sleep 0.1; exit 3")
	// Started from a thread that then exits, as a locked thread that
	// moved into a cgroup and could not go back does: its child and the
	// child's orphan are the thread group's all the same.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		started <- Spawn(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	Forget(cmd.Process.Pid)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the spawned child's status was lost: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(pidfile)
		orphan := strings.TrimSpace(string(b))
		if _, err := os.Stat("/proc/" + orphan); orphan != "" && os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile("/proc/" + orphan + "/stat")
			t.Fatalf("orphan %q not reaped: %s", orphan, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
