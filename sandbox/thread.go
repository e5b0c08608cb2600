package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// threadNetNS is the calling thread's own namespace file. /proc/self/ns/net
// would be the main thread's, which is not the one we are moving.
const threadNetNS = "/proc/thread-self/ns/net"

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
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("open network %q: %w", name, err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("network %q does not exist (%s is not a mounted namespace): %w", name, path, errdefs.ErrNotFound)
	}
	return fd, nil
}

// onScratchThread runs body on a new goroutine locked to its thread. body
// may move the thread into another network namespace; the thread is moved
// back to the namespace it started in and only then unlocked. If moving back
// fails, the goroutine exits locked and the runtime kills the thread, so no
// other goroutine can ever run in a namespace it did not ask for.
func onScratchThread(body func() error) error {
	type outcome struct {
		err      error
		returned bool
		panicked bool
		value    any
		stack    []byte
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		var out outcome
		defer func() { done <- out }()

		home, err := unix.Open(threadNetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread() // still in the namespace it started in
			out.err, out.returned = fmt.Errorf("open this thread's network namespace: %w", err), true
			return
		}
		defer unix.Close(home)

		defer func() {
			if v := recover(); v != nil {
				out.panicked, out.value, out.stack = true, v, debug.Stack()
			}
			if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
				out.err = errors.Join(out.err, fmt.Errorf("return thread to its network namespace (thread discarded): %w", err))
				return
			}
			runtime.UnlockOSThread()
		}()

		out.err = body()
		out.returned = true
	}()

	out := <-done
	switch {
	case out.panicked:
		if err, ok := out.value.(error); ok {
			panic(fmt.Errorf("sandbox: panic inside a network namespace: %w\n\n%s", err, out.stack))
		}
		panic(fmt.Sprintf("sandbox: panic inside a network namespace: %v\n\n%s", out.value, out.stack))
	case !out.returned:
		// runtime.Goexit (t.FailNow, log.Fatal's cousins) ended fn early: do
		// not let the caller mistake that for success.
		return errors.Join(out.err, errors.New("function run inside a network namespace exited its goroutine"))
	}
	return out.err
}
