package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
)

var errGone = fmt.Errorf("process is gone: %w", errdefs.ErrNotFound)

// process is one run, whose end the exit watcher sees through its pidfd
// (exits), so that a thousand idle workloads cost no goroutine and no
// thread of their own.
type process struct {
	st driver.State
	// child: the main process is the daemon's child, reaped here for its
	// status (false for an adopted run: not our child, cannot be reaped).
	child bool
	// followed: the main process was named by the workload's pid file
	// (spec.Forking). It is the daemon's child once the launcher that
	// forked it has exited, as the daemon is a child subreaper: its
	// status is collected then, and unknown otherwise.
	followed bool
	// cg holds every process of the run when the host has cgroups; else
	// the process group is all flyd can reach.
	cg        *sandbox.Cgroup
	oomBefore int
	fd        *os.File
	done      chan struct{}
	reaped    chan struct{}
	exit      driver.Exit

	releaseOnce sync.Once
	watching    chan struct{} // closed once the run's end is handled, or the run released
	exitID      uint64        // its registration with exits
}

func watch(st driver.State, pidfd int, child, followed bool, cg *sandbox.Cgroup, oomBefore int) (*process, error) {
	// A blocking pidfd stays out of Go's poller: exits watches it. The
	// os.File keeps count of its users, so that a signal being sent
	// through it (SignalMain) never meets a closed or reused number.
	if err := unix.SetNonblock(pidfd, false); err != nil {
		syscall.Close(pidfd)
		return nil, err
	}
	p := &process{
		st:        st,
		child:     child,
		followed:  followed,
		cg:        cg,
		oomBefore: oomBefore,
		fd:        os.NewFile(uintptr(pidfd), "pidfd"),
		done:      make(chan struct{}),
		reaped:    make(chan struct{}),
		watching:  make(chan struct{}),
	}
	if err := exits.watch(p, pidfd); err != nil {
		p.fd.Close()
		return nil, err
	}
	return p, nil
}

// ended handles the end of the run, once exits has seen its pidfd
// readable.
func (p *process) ended() {
	defer close(p.watching)
	rc, _ := p.fd.SyscallConn()
	// The leader is a zombie now (or gone, if adopted); its pid still names
	// the group, so nothing else can be signalled by mistake. Kill whatever
	// it left behind before reaping it.
	_ = p.killAll()
	p.exit = driver.Exit{At: time.Now(), Unknown: true}
	reaped := false
	if (p.child || p.followed) && rc != nil {
		var ws syscall.WaitStatus
		ok := false
		// A followed process that is not the daemon's child is not
		// waited for: waitid answers ECHILD at once.
		_ = rc.Control(func(fd uintptr) { ws, ok = reap(int(fd)) })
		reaper.Forget(p.st.PID)
		reaped = ok
		// Not reaped here means someone else did: the status stays unknown.
		if !ok && p.followed {
			p.exit.Reason = fmt.Sprintf("exit status unknown: pid %d (from forking.pid_file) was not flyd's child when it ended", p.st.PID)
		}
		if ok {
			p.exit.Unknown = false
			if ws.Signaled() {
				p.exit.Code = 128 + int(ws.Signal())
				p.exit.Signal = unix.SignalName(ws.Signal())
			} else {
				p.exit.Code = ws.ExitStatus()
			}
		}
	}
	if p.cg != nil {
		if n, err := p.cg.OOMKills(); err == nil && n > p.oomBefore {
			p.exit.Reason = "killed by the memory limit (resources.memory_max)"
		}
	}
	// The run's values die with it.
	_ = carriers.Remove(p.st.CarrierDir)
	close(p.done)
	if !reaped && rc != nil {
		// Not our child: its parent reaps it when it gets to it.
		_ = rc.Control(func(fd uintptr) { waitReaped(int(fd), reapWait) })
	}
	p.fd.Close()
	close(p.reaped)
}

// Reaped is closed once the run's main process is reaped and its pid free:
// with Done for a child of the daemon, when its parent gets to it for an
// adopted run.
func (p *process) Reaped() <-chan struct{} { return p.reaped }

// reapWait bounds the wait for an adopted run's main process to be reaped.
const reapWait = 10 * time.Second

// waitReaped waits, for at most limit, until the process of the pidfd is
// reaped. An adopted run's main process is not the daemon's child: its
// parent (init, once the daemon that started it died) reaps it when it
// gets to it, and until then its pid stays taken by a zombie, which a
// master that checks a pid file (postgres's postmaster.pid) takes for a
// live predecessor. The pidfd names this process only, so a reused pid
// cannot pass for it. A run adopted by the process that started it (a
// supervisor reopened in the same process) is reaped here.
//
// It sleeps between looks: a poll of the pidfd, which newer kernels wake
// at the reap, would hold a thread of the runtime's for each stop in a
// batch, and costs more CPU than the looks it saves.
func waitReaped(fd int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var info unix.Siginfo
		if unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil) == nil && info.Signo != 0 {
			return true
		}
		if err := unix.PidfdSendSignal(fd, 0, nil, 0); errors.Is(err, unix.ESRCH) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

func (p *process) State() driver.State   { return p.st }
func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() driver.Exit     { return p.exit }

// Signal delivers sig to the whole cgroup, children that left the
// session included, or to the process group without cgroups.
func (p *process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if p.cg != nil {
		return p.cg.Signal(sig)
	}
	err := syscall.Kill(-p.st.PID, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// SignalMain delivers sig to the main process alone, through its pidfd:
// never to another process that took its pid.
func (p *process) SignalMain(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(serr, unix.ESRCH) {
		return nil
	}
	return serr
}

func (p *process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.killAll()
}

// killAll kills every process of the run: the cgroup, frozen first so
// nothing forks away, or the process group.
func (p *process) killAll() error {
	if p.cg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return p.cg.Kill(ctx)
	}
	err := syscall.Kill(-p.st.PID, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Release stops watching the run, which goes on: a daemon that exits
// leaves its workloads running. A run whose end came first is handled
// before Release returns.
func (p *process) Release() {
	p.releaseOnce.Do(func() {
		released := false
		if rc, err := p.fd.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { released = exits.forget(p, int(fd)) })
		}
		if released {
			close(p.watching)
		}
		<-p.watching
		select {
		case <-p.done:
		default:
			p.fd.Close()
		}
	})
}

// reap collects the exit status of the child of the pidfd, which has
// exited. It is waited for through this pidfd alone: Go's own handle on
// the process is released at start (a second descriptor per run).
func reap(fd int) (syscall.WaitStatus, bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || info.Signo == 0 {
			return 0, false
		}
		break
	}
	// For SIGCHLD, si_status follows si_pid and si_uid (siginfo_t on
	// Linux: three ints, padding on 64-bit, then pid, uid, status).
	status := *(*int32)(unsafe.Add(unsafe.Pointer(&info), 24))
	const cldExited, cldKilled, cldDumped = 1, 2, 3 // si_code of SIGCHLD
	switch info.Code {
	case cldExited:
		return syscall.WaitStatus(status&0xff) << 8, true
	case cldKilled:
		return syscall.WaitStatus(status & 0x7f), true
	case cldDumped:
		return syscall.WaitStatus(status&0x7f) | 0x80, true
	}
	return 0, false
}
