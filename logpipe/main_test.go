package logpipe

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/logpipe/holder"
)

// A test's holder is this test binary again, as the daemon's is
// flyd-log-holder.
const holderEnv = "FLYD_LOGPIPE_TEST_HOLDER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(holderEnv); sock != "" {
		if err := holder.Serve(context.Background(), sock); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// holders starts test holders and stops them at the end of the test.
type holders struct {
	t    *testing.T
	mu   sync.Mutex
	cmds []*exec.Cmd
}

func (h *holders) started() []*exec.Cmd {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*exec.Cmd(nil), h.cmds...)
}

func (h *holders) start(socket string) func() error {
	return func() error {
		_ = os.Remove(socket)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), holderEnv+"="+socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		h.mu.Lock()
		h.cmds = append(h.cmds, cmd)
		h.mu.Unlock()
		h.t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return nil
	}
}
