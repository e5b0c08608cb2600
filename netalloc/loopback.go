package netalloc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// loopbackProbe is a socket bound to a kernel-chosen port: while it is
// open, the kernel hands that port to nobody else in the namespace.
type loopbackProbe struct {
	port  int
	close func() error
}

var errLoopbackDown = errors.New("loopback interface is down")

// bindLoopback binds 127.0.0.1:0 in the calling thread's namespace. It
// uses raw sockets rather than package net: no poller registration, and
// the errno comes back bare for classify.
func bindLoopback() (loopbackProbe, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return loopbackProbe{}, os.NewSyscallError("socket", err)
	}
	fail := func(err error) (loopbackProbe, error) {
		unix.Close(fd)
		return loopbackProbe{}, err
	}
	// A fresh namespace lets 127.0.0.1 be bound while lo is still down,
	// yet nothing can connect there; a port from it would be useless.
	if err := loopbackUp(fd); err != nil {
		return fail(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail(os.NewSyscallError("bind 127.0.0.1:0", err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail(os.NewSyscallError("getsockname", err))
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok || in4.Port == 0 {
		return fail(fmt.Errorf("bind 127.0.0.1:0: no port in %T", sa))
	}
	return loopbackProbe{port: in4.Port, close: func() error { return unix.Close(fd) }}, nil
}

func loopbackUp(fd int) error {
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl SIOCGIFFLAGS lo", err)
	}
	if ifr.Uint16()&unix.IFF_UP == 0 {
		return errLoopbackDown
	}
	return nil
}
