package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// threadNetNS is the calling thread's own namespace file. /proc/self/ns/net
// is the main thread's, which is not the one we move.
const threadNetNS = "/proc/thread-self/ns/net"

// pid is also the main thread's id.
var pid = os.Getpid()

// outcome is how body ended on its scratch thread.
type outcome struct {
	err      error
	returned bool // false: body panicked or called runtime.Goexit
	panicked bool
	value    any
	stack    []byte
}

// onScratchThread runs body on a new goroutine locked to a thread that is
// not the main thread. body may move the thread into another network
// namespace; the thread is moved back to the namespace it started in and
// only then unlocked. If moving back fails, the goroutine exits locked and
// the runtime kills the thread, so no other goroutine ever runs in a
// namespace it did not ask for. A panic in body is re-raised here.
func onScratchThread(body func() error) error {
	return onLockedThread(body, runAndReturn)
}

// onThrowawayThread runs body as onScratchThread does, on a thread that is
// never given back: body may change what cannot be changed back (its
// mount namespace), and the thread dies with its goroutine.
func onThrowawayThread(body func() error) error {
	return onLockedThread(body, runAndDiscard)
}

func onLockedThread(body func() error, run func(func() error, *outcome)) error {
	done := make(chan outcome, 1)
	go lockedRun(body, done, run)
	out := <-done
	switch {
	case out.panicked:
		if err, ok := out.value.(error); ok {
			panic(fmt.Errorf("sandbox: panic inside a network namespace: %w\n\n%s", err, out.stack))
		}
		panic(fmt.Sprintf("sandbox: panic inside a network namespace: %v\n\n%s", out.value, out.stack))
	case !out.returned:
		// runtime.Goexit (t.FailNow, for one) ended body early: do not let
		// the caller mistake that for success.
		return errors.Join(out.err, errors.New("function run inside a network namespace exited its goroutine"))
	}
	return out.err
}

// lockedRun locks the goroutine to its thread and runs body there, unless
// the thread is the main one. The main thread's namespace is what the rest
// of the system reads as the daemon's (/proc/PID/ns/net), and the runtime
// cannot discard it, only park it forever. So on the main thread it holds
// the thread, which keeps the runtime from handing it to the goroutine it
// starts, and relays that goroutine's outcome.
func lockedRun(body func() error, done chan<- outcome, run func(func() error, *outcome)) {
	runtime.LockOSThread()
	if unix.Gettid() == pid {
		relay := make(chan outcome, 1)
		go lockedRun(body, relay, run)
		out := <-relay
		runtime.UnlockOSThread()
		done <- out
		return
	}
	var out outcome
	// Deferred, because runtime.Goexit in body unwinds through here too.
	defer func() { done <- out }()
	run(body, &out)
}

// runAndDiscard runs body on the locked thread and leaves it locked, so
// that it dies with the goroutine. It reports through out, as
// runAndReturn does.
func runAndDiscard(body func() error, out *outcome) {
	defer func() {
		if v := recover(); v != nil {
			out.panicked, out.value, out.stack = true, v, debug.Stack()
		}
	}()
	out.err = body()
	out.returned = true
}

// runAndReturn runs body on the locked thread, then returns the thread to
// the namespace it was in and unlocks it; if that fails it leaves the
// thread locked so that it dies with the goroutine. It reports through out,
// which is complete even when body ends the goroutine.
func runAndReturn(body func() error, out *outcome) {
	home, err := unix.Open(threadNetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread() // untouched, still at home
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
}
