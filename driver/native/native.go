// Package native runs a workload's program directly on the host: no shell, a
// session and process group of its own, the spec's workdir and user, and no
// parent-death signal, so that a workload outlives the daemon that started it.
package native

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// Driver is the native runtime. The zero value is ready to use; it runs
// workloads without cgroups and can only adopt runs started without them.
type Driver struct {
	// Cgroups opens the cgroups of adopted runs.
	Cgroups *sandbox.Cgroups
}

func (Driver) Kind() spec.Kind { return spec.KindNative }

// Capabilities: a host program, its user the host's.
func (Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{RuntimeContext: "native"}
}

// Start execs the task's program. Exec failures are reported here, not as a
// quick exit, because os.StartProcess reports the child's execve error back.
func (d Driver) Start(ctx context.Context, t *driver.Task) (driver.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(t.Args) == 0 {
		return nil, fmt.Errorf("%w: empty command", driver.ErrExec)
	}
	env := t.Env
	attr := &syscall.SysProcAttr{Setsid: true}
	uid, gid := os.Getuid(), os.Getgid()
	// A spec that names no workdir (the API's: a spec file's names its
	// file's directory) runs in /, or in its user's home.
	workdir := t.Spec.Workdir
	if workdir == "" {
		workdir = "/"
	}
	if t.Spec.User != "" {
		acct, err := execenv.Lookup(t.Spec.User)
		if err != nil {
			return nil, fmt.Errorf("%w: user %q: %v", driver.ErrExec, t.Spec.User, err)
		}
		attr.Credential = acct.Credential()
		uid, gid = int(acct.UID), int(acct.GID)
		env = execenv.FillEnv(acct, env)
		if fi, err := os.Stat(acct.Home); t.Spec.Workdir == "" && err == nil && fi.IsDir() {
			workdir = acct.Home
		}
		if err := ownPipe(t.Log, uid, gid); err != nil {
			return nil, fmt.Errorf("log pipe: %w", err)
		}
	}
	path, err := execenv.LookPathAs(t.Args[0], env, attr.Credential)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrExec, err)
	}
	// Measured as the kernel will see it, before anything is written.
	final := slices.Concat(env, carriers.Pointers(t.CarrierDir, t.Files))
	if err := carriers.CheckExec(path, t.Args, final, carriers.StackLimit()); err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrExec, err)
	}
	if len(t.Files) > 0 {
		if _, err := carriers.Write(t.CarrierDir, uid, gid, t.Files); err != nil {
			return nil, err
		}
		env = final
	}
	started := false
	defer func() {
		if !started {
			_ = carriers.Remove(t.CarrierDir)
		}
	}()
	if t.Spec.Workdir != "" {
		if fi, err := os.Stat(t.Spec.Workdir); err != nil {
			return nil, fmt.Errorf("%w: workdir: %v", driver.ErrExec, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("%w: workdir %s is not a directory", driver.ErrExec, t.Spec.Workdir)
		}
	}
	if f := t.Spec.Forking; f != nil {
		if t.Cgroup == nil {
			return nil, fmt.Errorf("%w: forking: a daemonizing program is told from others by the workload's cgroup, and this host gives flyd none", driver.ErrExec)
		}
		if err := checkPIDDir(f.PIDFile, uid); err != nil {
			return nil, fmt.Errorf("%w: %w", driver.ErrExec, err)
		}
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()

	pidfd := -1
	attr.PidFD = &pidfd
	cmd := &exec.Cmd{
		Path:        path,
		Args:        t.Args,
		Env:         env,
		Dir:         workdir,
		Stdin:       devnull,
		Stdout:      t.Log,
		Stderr:      t.Log,
		SysProcAttr: attr,
	}
	oomBefore := 0
	if t.Cgroup != nil {
		oomBefore, _ = t.Cgroup.OOMKills()
	}
	// The child is born in its network and cgroup: it runs no instruction
	// outside them.
	err = reaper.Spawn(func() (int, error) {
		if err := sandbox.StartWithMounts(t.Mounts, t.Network, t.Cgroup, attr, cmd.Start); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return nil, classifyStartError(t.Args[0], err)
	}
	// Waiting for the run needs none of what it was started with: the
	// environment (with its carriers' paths) and the arguments are not
	// kept for as long as it runs.
	cmd.Env, cmd.Args = nil, nil
	st := driver.State{
		Driver:    spec.KindNative,
		PID:       cmd.Process.Pid,
		StartedAt: time.Now(),
	}
	// The run is waited for through the pidfd asked for above (reap): the
	// one Go keeps for its os.Process would be a second descriptor a run,
	// 20,000 for 10,000 workloads. (Release also makes its Pid -1.)
	_ = cmd.Process.Release()
	rs := runState{BootID: bootID()}
	if t.Cgroup != nil {
		rs.Cgroup = t.Cgroup.Name
	}
	child := true
	if f := t.Spec.Forking; f != nil {
		// The process started is a launcher: the run's main process is
		// the one its pid file names.
		main, err := follow(ctx, f, uid, t.Cgroup, st.PID, pidfd)
		if err != nil {
			return nil, err
		}
		st.PID, pidfd, rs.StartTicks, rs.PIDFile = main.pid, main.fd, main.startTicks, f.PIDFile
		child = false
	} else if ps, err := readStat(st.PID); err == nil {
		// The child is ours and not yet reaped, so its pid cannot be
		// reused before we read its start time.
		rs.StartTicks = ps.startTicks
	}
	started = true
	if len(t.Files) > 0 {
		st.CarrierDir = t.CarrierDir
	}
	if err := st.Encode(stateVersion, rs); err != nil {
		return nil, err
	}
	return watch(st, pidfd, child, !child, t.Cgroup, oomBefore)
}

// runState is what the native driver keeps of a run to know it again:
// its main process's start time and the boot it started in, which with
// the pid no other process has, and the cgroup it was born in. Version
// 0, the state of every runtime in one object, used the same names.
type runState struct {
	StartTicks uint64 `json:"start_ticks"`
	BootID     string `json:"boot_id"`
	Cgroup     string `json:"cgroup,omitempty"`
	// PIDFile is where the followed main process's pid was read, for a
	// daemonizing program (spec.Forking): the pid and start time above
	// are that process's, not the launcher's.
	PIDFile string `json:"pid_file,omitempty"`
}

const stateVersion = 1

// Recover adopts a run of an earlier daemon when pid, start time and boot id
// all still match.
func (d Driver) Recover(ctx context.Context, st driver.State) (driver.Process, error) {
	if st.Version > stateVersion {
		return nil, fmt.Errorf("pid %d: a run state of version %d, from a newer flyd: not adopted", st.PID, st.Version)
	}
	var rs runState
	if err := st.Decode(&rs); err != nil {
		return nil, err
	}
	if rs.BootID != bootID() {
		return nil, fmt.Errorf("pid %d: %w (the host rebooted)", st.PID, errGone)
	}
	fd, err := pidfdOpen(st.PID)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", st.PID, errGone)
	}
	// Checked after opening the pidfd: from here the pid cannot change owner
	// under us, so a match now is a match for as long as we watch.
	ps, err := readStat(st.PID)
	if err != nil || ps.startTicks != rs.StartTicks || ps.zombie {
		syscall.Close(fd)
		return nil, fmt.Errorf("pid %d: %w", st.PID, errGone)
	}
	var cg *sandbox.Cgroup
	if rs.Cgroup != "" {
		// A run born in a cgroup is adopted only if it is still in it.
		if d.Cgroups != nil {
			cg, err = d.Cgroups.Open(rs.Cgroup)
		}
		if cg == nil || err != nil || !cg.Contains(st.PID) {
			syscall.Close(fd)
			return nil, fmt.Errorf("pid %d is not in cgroup %s: %w", st.PID, rs.Cgroup, errGone)
		}
	}
	oom := 0
	if cg != nil {
		oom, _ = cg.OOMKills()
	}
	return watch(st, fd, false, false, cg, oom)
}

func classifyStartError(argv0 string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EACCES),
		errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EPERM),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.E2BIG):
		return fmt.Errorf("%w: exec %s: %v", driver.ErrExec, argv0, err)
	}
	return fmt.Errorf("exec %s: %w", argv0, err)
}

// ownPipe gives a log pipe to the workload's user. A pipe's inode is its
// creator's, 0600, and opening /proc/self/fd/1 (/dev/stdout) checks it
// like a file's: nginx's `access_log /dev/stdout` as www-data is refused
// a root's pipe. The user may then also open its pipe for reading, which
// gives it only what it wrote itself. A log file is left alone: it is the
// daemon's.
func ownPipe(f *os.File, uid, gid int) error {
	if f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		return err
	}
	return f.Chown(uid, gid)
}
