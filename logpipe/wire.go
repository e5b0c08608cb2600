package logpipe

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The holder's protocol, over a SOCK_SEQPACKET socket: one message is an
// operation byte, then keys separated by newlines, with the descriptors
// of those keys, in order, as SCM_RIGHTS. The daemon asks, the holder
// answers each message.
const (
	opPut   = 'P' // hold these read ends (replacing a key held already)
	opDrop  = 'D' // close these
	opFetch = 'G' // send every read end: opFds messages, then opEnd
	opFds   = 'F'
	opEnd   = 'Z'
	opOK    = 'K'
	opErr   = 'E' // the rest is the reason
)

// maxFds is the most descriptors one message carries: the kernel's
// SCM_MAX_FD is 253.
const maxFds = 253

// maxMsg bounds a message: maxFds keys of a workload name and a nonce.
const maxMsg = 64 << 10

// ioTimeout bounds an exchange with the holder: it answers at once or
// is taken for gone.
const ioTimeout = 10 * time.Second

func send(c *net.UnixConn, op byte, keys []string, fds []int) error {
	b := append([]byte{op}, strings.Join(keys, "\n")...)
	if len(b) > maxMsg {
		return fmt.Errorf("log holder message of %d bytes", len(b))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = c.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, _, err := c.WriteMsgUnix(b, oob, nil)
	return err
}

// recvBufs are recv's buffers, used again: a message may take maxMsg,
// and one made for each exchange was most of what a batch start left to
// the collector.
var recvBufs = sync.Pool{New: func() any { return new(recvBuf) }}

type recvBuf struct {
	msg [maxMsg + 1]byte
	oob [(maxFds*4 + 64)]byte
}

// recv reads one message; its descriptors are the caller's to close.
func recv(c *net.UnixConn, deadline time.Time) (op byte, keys []string, fds []int, err error) {
	rb := recvBufs.Get().(*recvBuf)
	defer recvBufs.Put(rb)
	buf, oob := rb.msg[:], rb.oob[:unix.CmsgSpace(maxFds*4)]
	_ = c.SetReadDeadline(deadline)
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, nil, nil, err
	}
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return 0, nil, nil, perr
		}
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n == 0 {
		closeAll(fds)
		return 0, nil, nil, errors.New("log holder: connection closed")
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeAll(fds)
		return 0, nil, nil, errors.New("log holder: message truncated")
	}
	if n > 1 {
		keys = strings.Split(string(buf[1:n]), "\n")
	}
	if len(fds) > 0 && len(fds) != len(keys) {
		closeAll(fds)
		return 0, nil, nil, fmt.Errorf("log holder: %d keys and %d descriptors", len(keys), len(fds))
	}
	return buf[0], keys, fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// peerAllowed is the holder's and the daemon's check of each other:
// root, or the same user.
func peerAllowed(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != unix.Getuid() {
		return fmt.Errorf("log holder socket: peer uid %d refused", cred.Uid)
	}
	return nil
}
