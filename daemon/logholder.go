package daemon

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/reaper"
)

// holderSocket is the log holder's socket in the run dir.
func holderSocket(runDir string) string { return filepath.Join(runDir, "logs.sock") }

// openLogPipes reaches the run dir's log holder, starting one if none
// answers. Without it every run writes its log file itself, unbounded
// against a hostile writer, and the daemon says so.
func openLogPipes(runDir string, log *zap.Logger) *logpipe.Pipes {
	socket := holderSocket(runDir)
	p, err := logpipe.Open(logpipe.Config{Socket: socket, StartHolder: startHolder(socket), Logger: log.Named("logs")})
	if err != nil {
		log.Error("no log holder: workloads write their log files themselves, and a daemon restart is not covered", zap.Error(err))
		return nil
	}
	return p
}

// startHolder runs `flyd-daemon log-holder` in a session of its own:
// neither a terminal's signals nor the end of the daemon reach it, and
// it holds no descriptor of the daemon's but its socket's.
func startHolder(socket string) func() error {
	return func() error {
		// The run dir is trusted; a socket there that answers nothing is
		// a dead holder's.
		if fi, err := os.Lstat(socket); err == nil {
			if fi.Mode()&fs.ModeSocket == 0 {
				return fmt.Errorf("%s is not a socket", socket)
			}
			if err := os.Remove(socket); err != nil {
				return err
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(exe, "log-holder", "--socket", socket)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = reaper.Spawn(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
		if err != nil {
			return err
		}
		// Reaped while this daemon lives; after it, by whoever inherits it.
		go func() {
			_ = cmd.Wait()
			reaper.Forget(cmd.Process.Pid)
		}()
		return nil
	}
}
