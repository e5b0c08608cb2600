package netalloc

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// testNetns is a fresh network namespace kept alive by a descriptor. The
// sandbox package owns the real ones; this is only what tests need.
type testNetns struct{ fd int }

// newNetns creates a namespace whose lo is down, as unshare leaves it.
func newNetns(t *testing.T) *testNetns {
	t.Helper()
	needRoot(t)
	var fd int
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread ends with the goroutine instead of
		// going back to the pool inside the new namespace.
		runtime.LockOSThread()
		if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return
		}
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}()
	<-done
	if err != nil {
		t.Fatalf("new network namespace: %v", err)
	}
	n := &testNetns{fd: fd}
	t.Cleanup(func() { unix.Close(fd) })
	return n
}

// Do runs fn on a thread of its own that joins the namespace and dies
// with its goroutine.
func (n *testNetns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// loUp brings lo up, as the sandbox does for every isolated network.
func (n *testNetns) loUp(t *testing.T) {
	t.Helper()
	err := n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	})
	if err != nil {
		t.Fatalf("lo up: %v", err)
	}
}

// portRange narrows the namespace's ephemeral range; /proc/sys/net is
// resolved against the namespace of the thread that opens it.
func (n *testNetns) portRange(t *testing.T, lo, hi int) {
	t.Helper()
	err := n.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", fmt.Appendf(nil, "%d %d", lo, hi), 0)
	})
	if err != nil {
		t.Fatalf("ip_local_port_range: %v", err)
	}
}

// countingNS counts the attempts an allocation makes: each one enters the
// namespace once.
type countingNS struct {
	inner Namespace
	calls atomic.Int32
}

func (c *countingNS) Do(fn func() error) error {
	c.calls.Add(1)
	if c.inner == nil {
		return fn()
	}
	return c.inner.Do(fn)
}
