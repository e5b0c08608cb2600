package daemon

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/internal/trust"
	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
)

// holderSocket is the log holder's socket in the run dir.
func holderSocket(runDir string) string { return filepath.Join(runDir, "logs.sock") }

// openLogPipes reaches the run dir's log holder, starting one if none
// answers. Without it every run writes its log file itself, unbounded
// against a hostile writer, and the daemon says so.
func openLogPipes(ctx context.Context, runDir string, place *placement, log *zap.Logger) *logpipe.Pipes {
	socket := holderSocket(runDir)
	p, err := logpipe.Open(logpipe.Config{Socket: socket, StartHolder: startHolder(ctx, socket, place, log), Logger: log.Named("logs")})
	if err != nil {
		log.Error("no log holder: workloads write their log files themselves, and a daemon restart is not covered", zap.Error(err))
		return nil
	}
	return p
}

// holderProgram is the log holder's program, beside the daemon's.
const holderProgram = "flyd-log-holder"

// holderCommand is the holder's command line: flyd-log-holder beside the
// daemon's program, which links the holder alone; where it is missing
// (a build of the daemon's program alone), or could be changed by someone
// who could not change the daemon's program (trust.Program), the daemon's
// own program, which holds the same holder (`flyd-daemon log-holder`).
func holderCommand(socket string, log *zap.Logger) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	return holderCommandOf(self, socket, log), nil
}

// holderCommandOf is holderCommand for the daemon's program self.
func holderCommandOf(self, socket string, log *zap.Logger) []string {
	p := filepath.Join(filepath.Dir(self), holderProgram)
	if _, err := os.Stat(p); err == nil {
		err := trust.Program(p, self)
		if err == nil {
			return []string{p, "--socket", socket}
		}
		log.Warn("not running the log holder's program beside the daemon's: the daemon's own holds the logs instead", zap.Error(err))
	}
	return []string{self, "log-holder", "--socket", socket}
}

// startHolder runs the log holder (holderCommand) in a session of its own:
// neither a terminal's signals nor the end of the daemon reach it, and
// it holds no descriptor of the daemon's but its socket's. Under
// systemd's placement (place) it is born in its leaf of the workloads'
// scope, or put there, the scope made for it, when the scope is not.
func startHolder(ctx context.Context, socket string, place *placement, log *zap.Logger) func() error {
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
		argv, err := holderCommand(socket, log)
		if err != nil {
			return err
		}
		var cmd *exec.Cmd
		spawn := func(leaf string) error {
			cmd = exec.Command(argv[0], argv[1:]...)
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if leaf != "" {
				fd, err := unix.Open(leaf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
			}
			return reaper.Spawn(func() (int, error) {
				if err := cmd.Start(); err != nil {
					return 0, err
				}
				return cmd.Process.Pid, nil
			})
		}
		leaf := place.leaf()
		err = spawn(leaf)
		if err != nil && leaf != "" {
			// The scope went meanwhile: born where the daemon is, and
			// placed below.
			leaf = ""
			err = spawn("")
		}
		if err != nil {
			return err
		}
		if leaf == "" && place != nil && !place.off.Load() {
			made, err := place.keep(ctx, cmd.Process.Pid)
			if err != nil {
				log.Warn("cannot place the log holder in the workloads' scope", zap.String("scope", place.unit), zap.Error(err))
			} else if made {
				// A scope made anew: its children get their controllers.
				if _, err := sandbox.NewDelegatedCgroups(place.parent); err != nil {
					log.Warn("cannot enable the controllers of the workloads' scope", zap.String("scope", place.unit), zap.Error(err))
				}
			}
		}
		// Reaped while this daemon lives; after it, by whoever inherits it.
		go func() {
			_ = cmd.Wait()
			reaper.Forget(cmd.Process.Pid)
		}()
		return nil
	}
}
