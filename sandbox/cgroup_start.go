package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// StartIn runs start, which forks one child (exec.Cmd.Start, typically
// with cmd.SysProcAttr as attr), so that the child is born inside the
// cgroup: it runs no instruction, and so forks nothing, outside it.
//
// attr must be the SysProcAttr start forks with, on both versions, so
// that code written on one host runs on the other. On v2 StartIn sets
// CLONE_INTO_CGROUP there for the call (see Attr; Linux 5.7) and restores
// it after. On v1, which has no such flag, it moves an OS thread (never
// the main one) into the cgroup in every hierarchy, runs start on it and
// moves it back; a thread that cannot be moved back dies instead of
// running other goroutines. start then runs on another goroutine (a panic
// is re-raised here) and must not call runtime.UnlockOSThread.
//
// On a hybrid host (v1 hierarchies and a bare v2 tree beside them) the
// child is also born, by that flag, into the cgroup's directory of the v2
// tree, where its sockets are told apart (cgroup_socket.go).
//
// On v1 the daemon is, for that moment, a member of the cgroup: its thread
// counts against PidsMax (a limit of 1 leaves no room for the child) and
// CPUMax, and a cgroup already at its memory limit could make the OOM
// killer choose the daemon. Start into a cgroup that is empty.
//
// As with Network.Do, a child started with Pdeathsig gets it when the
// starting thread exits, and on v1 that thread goes back to the runtime's
// pool.
func (g *Cgroup) StartIn(attr *syscall.SysProcAttr, start func() error) error {
	return g.startIn(attr, false, start)
}

// startIn is StartIn; with here, on cgroup v1 the calling thread itself,
// locked and thrown away once start returns, joins the cgroup for good.
func (g *Cgroup) startIn(attr *syscall.SysProcAttr, here bool, start func() error) error {
	if attr == nil {
		return fmt.Errorf("start in cgroup %q: no SysProcAttr to start with: %w", g.Name, errdefs.ErrInvalid)
	}
	unlock := lockCgroup(g.Path, false)
	defer unlock()
	if g.cg.l.version == 2 {
		cleanup, err := g.Attr(attr)
		if err != nil {
			return err
		}
		defer cleanup()
		err = start()
		if errors.Is(err, unix.ENOSYS) { // no clone3: before Linux 5.3
			return fmt.Errorf("start in cgroup %q: this kernel cannot start a process inside a cgroup (clone3 with CLONE_INTO_CGROUP needs Linux 5.7): %w: %w", g.Name, err, errdefs.ErrUnavailable)
		}
		return err
	}
	if d := g.dirFor("freezer"); d != "" {
		state, err := readFile(filepath.Join(d, "freezer.state"))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cgroup %q does not exist: %w", g.Name, errdefs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("start in cgroup %q: %w", g.Name, err)
		}
		if s := strings.TrimSpace(string(state)); s != "THAWED" {
			return fmt.Errorf("start in cgroup %q: it is %s, and the starting thread would freeze too: %w", g.Name, s, errdefs.ErrConflict)
		}
	}
	// A hybrid host's v2 tree, where sockets are told apart, takes the
	// child by flag: a thread cannot move there alone.
	cleanup, err := g.intoSockDir(attr)
	if err != nil {
		return err
	}
	defer cleanup()
	if here {
		if _, err := g.enter(strconv.Itoa(unix.Gettid())); err != nil {
			return err
		}
		return start()
	}
	return onCgroupThread(g, start)
}

// enter moves the thread tid into g in each of its hierarchies, in order,
// and says how many it went through (those g is not in counted too).
func (g *Cgroup) enter(tid string) (moved int, err error) {
	for i := range g.cg.l.hier {
		if !g.in[i] {
			moved++
			continue
		}
		if err := writeCgroupFile(filepath.Join(g.dirs[i], "tasks"), tid); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("%w: %w", err, errdefs.ErrNotFound)
			}
			return moved, fmt.Errorf("start in cgroup %q: %w", g.Name, err)
		}
		moved++
	}
	return moved, nil
}

// Attr sets CLONE_INTO_CGROUP in attr (UseCgroupFD, CgroupFD) for a v2
// cgroup, for callers that fork some other way than through StartIn.
// cleanup closes the descriptor and restores attr's previous values; call
// it once the child exists. On v1 there is no such flag: it fails,
// wrapping errdefs.ErrNotImplemented, and StartIn is the way.
func (g *Cgroup) Attr(attr *syscall.SysProcAttr) (cleanup func(), err error) {
	if g.cg.l.version != 2 {
		return nil, fmt.Errorf("cgroup %q: cgroup v1 cannot start a process inside a cgroup by flag, use StartIn: %w", g.Name, errdefs.ErrNotImplemented)
	}
	fd, err := unix.Open(g.dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("cgroup %q does not exist: %w", g.Name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open cgroup %q: %w", g.Name, err)
	}
	use, old := attr.UseCgroupFD, attr.CgroupFD
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	return func() {
		attr.UseCgroupFD, attr.CgroupFD = use, old
		unix.Close(fd)
	}, nil
}

// onCgroupThread runs start on a locked thread inside g in every v1
// hierarchy; the structure is onScratchThread's (scratch.go), with cgroups
// for the namespace.
func onCgroupThread(g *Cgroup, start func() error) error {
	done := make(chan outcome, 1)
	go lockedCgroupRun(g, start, done)
	out := <-done
	switch {
	case out.panicked:
		if err, ok := out.value.(error); ok {
			panic(fmt.Errorf("sandbox: panic while starting in cgroup %q: %w\n\n%s", g.Name, err, out.stack))
		}
		panic(fmt.Sprintf("sandbox: panic while starting in cgroup %q: %v\n\n%s", g.Name, out.value, out.stack))
	case !out.returned:
		return errors.Join(out.err, fmt.Errorf("function starting in cgroup %q exited its goroutine", g.Name))
	}
	return out.err
}

// lockedCgroupRun is lockedRun for cgroups: the main thread's cgroup is
// what /proc/PID/cgroup shows as the daemon's, and the runtime cannot
// discard the main thread, so it relays to a goroutine on another thread.
func lockedCgroupRun(g *Cgroup, start func() error, done chan<- outcome) {
	runtime.LockOSThread()
	if unix.Gettid() == pid {
		relay := make(chan outcome, 1)
		go lockedCgroupRun(g, start, relay)
		out := <-relay
		runtime.UnlockOSThread()
		done <- out
		return
	}
	var out outcome
	defer func() { done <- out }()
	runInCgroup(g, start, &out)
}

// runInCgroup moves the locked thread into g, runs start and moves the
// thread home, then unlocks it; if it cannot go home it stays locked and
// dies with its goroutine.
func runInCgroup(g *Cgroup, start func() error, out *outcome) {
	hier := g.cg.l.hier
	home, err := procCgroups("/proc/thread-self/cgroup", g.cg.l)
	if err != nil {
		runtime.UnlockOSThread() // untouched
		out.err, out.returned = fmt.Errorf("read this thread's cgroups: %w", err), true
		return
	}
	homeDirs := make([]string, len(hier))
	for i, h := range hier {
		if !g.in[i] {
			continue
		}
		var ok bool
		if homeDirs[i], ok = h.dir(home[i]); !ok {
			runtime.UnlockOSThread()
			out.err, out.returned = fmt.Errorf("this thread's %s cgroup %q is outside the mounted hierarchy", h.ctrl, home[i]), true
			return
		}
	}
	tid := strconv.Itoa(unix.Gettid())
	moved := 0
	defer func() {
		if v := recover(); v != nil {
			out.panicked, out.value, out.stack = true, v, debug.Stack()
		}
		for i := moved - 1; i >= 0; i-- {
			if !g.in[i] {
				continue
			}
			if err := writeCgroupFile(filepath.Join(homeDirs[i], "tasks"), tid); err != nil {
				out.err = errors.Join(out.err, fmt.Errorf("return thread to its cgroup (thread discarded): %w", err))
				return
			}
		}
		runtime.UnlockOSThread()
	}()
	if moved, err = g.enter(tid); err != nil {
		out.err, out.returned = err, true
		return
	}
	out.err = start()
	out.returned = true
}
