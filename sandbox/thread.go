package sandbox

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// Do runs fn on an OS thread switched into the network's namespace and
// switches the thread back before releasing it to the Go scheduler.
//
// Everything fn does on its own goroutine happens in the namespace: sockets
// it creates (net.Listen, net.Dial) belong to it for their whole life, and a
// child started with exec.Cmd.Start inherits it. Goroutines fn starts run on
// other threads, in the host namespace. fn must not call
// runtime.UnlockOSThread.
//
// fn runs on a fresh goroutine so that, if the thread cannot be switched
// back, the goroutine can exit still locked and the Go runtime discards the
// thread instead of reusing it. A panic in fn is re-raised in the caller.
// The thread is never the process's main thread, whose namespace the rest
// of the system reads as the daemon's (/proc/PID/ns/net).
//
// A child started with SysProcAttr.Pdeathsig gets its signal when the
// thread that started it exits, not the process: Do's threads go back to
// the runtime's pool and live on, except the rare one discarded above.
func (nw *Network) Do(fn func() error) error {
	fd, err := openNamespace(nw.Name, nw.Path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return onScratchThread(func() error {
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter network %q: %w", nw.Name, err)
		}
		return fn()
	})
}

// Enter switches the calling goroutine's thread into the network's namespace
// for good. It is for a process about to execve into a workload (the thread
// that calls execve passes its namespaces on); a daemon must use Do. The
// thread stays locked, even on error, so the goroutine never migrates off it.
func (nw *Network) Enter() error {
	fd, err := openNamespace(nw.Name, nw.Path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	runtime.LockOSThread()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network %q: %w", nw.Name, err)
	}
	return nil
}

// openNamespace opens path only if it is a namespace: an unmounted leftover
// file would otherwise make setns fail with a bare EINVAL.
func openNamespace(name, path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, fmt.Errorf("network %q does not exist: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return -1, fmt.Errorf("open network %q: %w", name, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("open network %q: %w", name, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("network %q does not exist (%s is not a mounted namespace): %w", name, path, errdefs.ErrNotFound)
	}
	return fd, nil
}
