package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
)

// outputGrace is how long a check waits, once its command has exited, for
// the output pipe to close. A process that left the command's group (a
// daemonising helper) may hold the pipe for ever; it must not turn a
// command that exited 0 into a timeout.
const outputGrace = 100 * time.Millisecond

// Exec runs argv with env (a KEY=VALUE slice, and nothing of the daemon's
// own environment) inside nw and cgroup cg (either may be nil), seeing m
// in place of the host's as the run it checks does (its /dev/shm, /tmp,
// and its network's /etc/hosts; empty keeps the host's): healthy
// when it exits 0. A bare program name is looked up in env's PATH. The
// command gets a process group of its own, which is killed when ctx ends
// and, after the command exits, so that nothing it started in the
// background outlives the check. Its output (stdout and stderr) is kept
// only as a short, trimmed excerpt for the error, the last 256 bytes, with
// env's values hidden; an error names argv[0], never the other arguments
// or the environment.
//
// The command runs with cred (the workload's user; nil is the daemon's
// own), and is the daemon's child: a reaper of the daemon's orphans must
// not wait for it, or the check loses the exit status and fails.
func Exec(nw *sandbox.Network, cg *sandbox.Cgroup, m sandbox.Mounts, cred *syscall.Credential, argv, env []string) Probe {
	return execProbe{nw: nw, cg: cg, m: m, cred: cred, argv: argv, env: env}
}

type execProbe struct {
	nw   *sandbox.Network
	cg   *sandbox.Cgroup
	m    sandbox.Mounts
	cred *syscall.Credential
	argv []string
	env  []string
}

func (p execProbe) Check(ctx context.Context) error {
	if len(p.argv) == 0 || p.argv[0] == "" {
		return fmt.Errorf("exec probe: empty command: %w", errdefs.ErrInvalid)
	}
	name := p.argv[0]
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("exec %s: %w", name, err)
	}
	path, err := execenv.LookPathAs(name, p.env, p.cred)
	if err != nil {
		return err
	}
	proc, out, err := p.start(path)
	if err != nil {
		return fmt.Errorf("exec %s: %w", name, err)
	}
	return finish(ctx, name, proc, out, p.env)
}

// start forks the command, born inside its network, cgroup and mounts, with its
// output on a pipe whose read end it returns.
func (p execProbe) start(path string) (*os.Process, *os.File, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close() // the child holds its own copy
	env := p.env
	if env == nil {
		env = []string{} // nil would hand over the daemon's environment
	}
	attr := &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	if p.m == (sandbox.Mounts{}) {
		// A probe has no business outliving the daemon that waits for
		// it. The signal comes when the thread that forked it exits, and
		// the thread of a start with mounts is thrown away at once: such
		// a probe runs to its own end when the daemon dies.
		attr.Pdeathsig = syscall.SIGKILL
	}
	var proc *os.Process
	// Spawn keeps the daemon's reaper of orphans away from this child.
	err = reaper.Spawn(func() (int, error) {
		err := sandbox.StartWithMounts(p.m, p.nw, p.cg, attr, func() error {
			var err error
			proc, err = os.StartProcess(path, p.argv, &os.ProcAttr{
				Env:   env,
				Files: []*os.File{devnull, w, w},
				Sys:   attr,
			})
			return err
		})
		if err != nil {
			return 0, err
		}
		return proc.Pid, nil
	})
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return proc, r, nil
}

// finish waits for the command, or kills it when ctx ends, and makes its
// verdict. The command's group is killed only while the command is an
// unreaped zombie or still running: until it is reaped its pid, which is
// the group's id, cannot be reused, so the signal cannot reach a stranger.
func finish(ctx context.Context, name string, proc *os.Process, r *os.File, env []string) error {
	defer r.Close()
	out := tailFor(env)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	exited := make(chan error, 1)
	go func() { exited <- waitExited(proc.Pid) }()

	var cancelled error
	select {
	case <-exited:
	case <-ctx.Done():
		cancelled = ctx.Err()
		_ = proc.Kill() // in case it moved to a group of its own
		killGroup(proc.Pid)
		<-exited
	}
	killGroup(proc.Pid) // whatever it left running in the background
	state, werr := proc.Wait()
	reaper.Forget(proc.Pid)

	grace := time.NewTimer(outputGrace)
	select {
	case <-copied:
	case <-grace.C:
		_ = r.SetReadDeadline(time.Now())
		<-copied
	}
	grace.Stop()

	switch {
	case werr != nil:
		return fmt.Errorf("exec %s: %w", name, werr)
	case state.Success():
		return nil
	case cancelled != nil:
		return fmt.Errorf("exec %s: no result in time, killed%s: %w", name, withOutput(out, env), cancelled)
	}
	return fmt.Errorf("exec %s: %s%s", name, state, withOutput(out, env))
}

// waitExited blocks until the process has exited, without reaping it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func killGroup(pid int) {
	_ = unix.Kill(-pid, unix.SIGKILL) // ESRCH: nothing left in it
}

func withOutput(out *tail, env []string) string {
	if s := excerpt(out.buf, env); s != "" {
		return fmt.Sprintf("; output: %q", s)
	}
	return ""
}

// Inside runs argv inside the run ex is, by its runtime (a container's
// command, as `docker exec` runs it): healthy when it exits 0. Its output
// is kept as Exec keeps it, an excerpt with env's values hidden (the
// workload's environment, which the run's holds); an error names argv[0]
// alone.
func Inside(ex driver.Execer, argv, env []string) Probe {
	return insideProbe{ex: ex, argv: argv, env: env}
}

type insideProbe struct {
	ex   driver.Execer
	argv []string
	env  []string
}

func (p insideProbe) Check(ctx context.Context) error {
	if len(p.argv) == 0 || p.argv[0] == "" {
		return fmt.Errorf("exec probe: empty command: %w", errdefs.ErrInvalid)
	}
	name := p.argv[0]
	out := tailFor(p.env)
	exit, err := p.ex.Exec(ctx, p.argv, out)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("exec %s: no result in time, killed%s: %w", name, withOutput(out, p.env), ctx.Err())
	case err != nil:
		return fmt.Errorf("exec %s: %w", name, err)
	case exit.Success():
		return nil
	}
	return fmt.Errorf("exec %s: %s%s", name, exit, withOutput(out, p.env))
}
