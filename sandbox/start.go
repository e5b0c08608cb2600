package sandbox

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start runs start, which forks one child (exec.Cmd.Start with attr as its
// SysProcAttr), so that the child is born in network nw and in cgroup g;
// either may be nil. Both are properties of the forking thread on cgroup
// v1, so both are entered on one thread.
func Start(nw *Network, g *Cgroup, attr *syscall.SysProcAttr, start func() error) error {
	switch {
	case g == nil && nw == nil:
		return start()
	case g == nil:
		return nw.Do(start)
	case nw == nil:
		return g.StartIn(attr, start)
	case g.cg.l.version == 2:
		// CLONE_INTO_CGROUP travels in attr: any thread will do.
		return g.StartIn(attr, func() error { return nw.Do(start) })
	}
	return g.StartIn(attr, func() error { return nw.here(start) })
}

// here runs start with the calling thread, already locked by its caller,
// switched into the namespace, and switches it back. A thread that cannot
// come back stays locked one level more than its caller knows, so it dies
// with its goroutine instead of running other code in the namespace.
func (nw *Network) here(start func() error) error {
	fd, err := openNamespace(nw.Name, nw.Path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer unix.Close(home)
	runtime.LockOSThread()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network %q: %w", nw.Name, err)
	}
	err = start()
	if serr := unix.Setns(home, unix.CLONE_NEWNET); serr != nil {
		return fmt.Errorf("leave network %q (thread discarded): %w", nw.Name, serr)
	}
	runtime.UnlockOSThread()
	return err
}
