package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a Unix socket connection, as the
// kernel reports it (SO_PEERCRED, SO_PEERGROUPS) when it connected: it
// cannot be forged by the client, and is read once per connection.
type Peer struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
}

type peerKey struct{}

// withPeer puts the connection's peer, read when it was accepted, in the
// context of every request on it.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		return context.WithValue(ctx, peerKey{}, pc.peer)
	}
	return ctx
}

func peerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// PeerPolicy serves root, the daemon's own uid, and members of the group
// gid (primary or supplementary; gid < 0 means no such group).
func PeerPolicy(gid int) func(Peer) bool {
	self := uint32(os.Getuid())
	return func(p Peer) bool {
		switch {
		case p.UID == 0 || p.UID == self:
			return true
		case gid < 0:
			return false
		}
		return p.GID == uint32(gid) || slices.Contains(p.Groups, uint32(gid))
	}
}

// readPeer asks the kernel who is at the other end of c.
func readPeer(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, errors.New("not a Unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	var perr error
	if err := raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		if cred, perr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); perr != nil {
			return
		}
		p = Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
		p.Groups, perr = peerGroups(int(fd))
	}); err != nil {
		return Peer{}, err
	}
	return p, perr
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13): the supplementary groups
// the peer had when it connected.
func peerGroups(fd int) ([]uint32, error) {
	gs := make([]uint32, 64)
	for {
		n := uint32(len(gs) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&gs[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == 0:
			return gs[:n/4], nil
		case errno == unix.ERANGE && int(n/4) > len(gs):
			gs = make([]uint32, n/4)
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
	}
}
