package api

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a Unix socket connection, as the
// kernel reports it (SO_PEERCRED): it cannot be forged by the client.
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}

type peerKey struct{}

func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid})
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
		case p.GID == uint32(gid):
			return true
		}
		return hasGroup(p.PID, uint32(gid))
	}
}

// hasGroup reads the peer's supplementary groups from /proc: SO_PEERCRED
// carries only the primary one.
func hasGroup(pid int32, gid uint32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Groups:")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if g, err := strconv.ParseUint(f, 10, 32); err == nil && uint32(g) == gid {
				return true
			}
		}
		return false
	}
	return false
}
