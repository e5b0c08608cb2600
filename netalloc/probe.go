package netalloc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// probeAddrs are the binds a workload is likely to make. The wildcards
// overlap every specific address of their family (and [::] the IPv4 ones
// too, dual-stack), and 127.0.0.1 is kept on its own because it is what
// most development servers bind.
var probeAddrs = []struct {
	name string
	sa   unix.Sockaddr
}{
	{"0.0.0.0", &unix.SockaddrInet4{}},
	{"127.0.0.1", &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}},
	{"[::]", &unix.SockaddrInet6{}},
}

// checkForeign refuses a port that a process flyd does not manage holds in
// the namespace, naming the process when /proc can tell.
func checkForeign(ns Namespace, network string, port int) error {
	var busy bool
	var inode uint64
	err := inNamespace(ns, network, func() error {
		var err error
		if busy, err = portBusy(port); err != nil || !busy {
			return err
		}
		// Only this thread sees the namespace's sockets, so the inode is
		// looked up here; the owning pid is not namespaced and is found
		// outside.
		inode = socketInode("/proc/thread-self/net", port)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: check port %d in network %s: %w", errdefs.ErrUnavailable, port, network, err)
	}
	if !busy {
		return nil
	}
	e := &PortInUseError{Network: network, Port: port}
	if inode != 0 {
		e.PID, e.Program = socketOwner("/proc", inode)
	}
	return e
}

// portBusy binds port on each probe address and reports whether any bind
// met EADDRINUSE. SO_REUSEADDR is set as every server sets it, so a
// connection lingering in TIME_WAIT does not count as a holder.
func portBusy(port int) (bool, error) {
	for _, a := range probeAddrs {
		busy, err := bindBusy(a.sa, port)
		if err != nil {
			return false, fmt.Errorf("probe %s:%d: %w", a.name, port, err)
		}
		if busy {
			return true, nil
		}
	}
	return false, nil
}

func bindBusy(sa unix.Sockaddr, port int) (bool, error) {
	family := unix.AF_INET
	if in6, ok := sa.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
		c := *in6
		c.Port = port
		sa = &c
	} else {
		c := *sa.(*unix.SockaddrInet4)
		c.Port = port
		sa = &c
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return false, nil // no IPv6 here: nobody can hold [::]:port either
	}
	if err != nil {
		return false, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return false, os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if family == unix.AF_INET6 {
		// Dual-stack whatever the sysctl says, so an IPv4 holder is seen
		// from [::] as a dual-stack workload would meet it.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return false, os.NewSyscallError("setsockopt IPV6_V6ONLY", err)
		}
	}
	err = unix.Bind(fd, sa)
	// Any other bind error (an address this namespace lacks) says nothing
	// about who holds the port.
	return errors.Is(err, unix.EADDRINUSE), nil
}
