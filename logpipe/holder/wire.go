package holder

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
	OpPut   = 'P' // hold these read ends (replacing a key held already)
	OpDrop  = 'D' // close these
	OpFetch = 'G' // send every read end: OpFds messages, then OpEnd
	OpFds   = 'F'
	OpEnd   = 'Z'
	OpOK    = 'K'
	OpErr   = 'E' // the rest is the reason
)

// MaxFds is the most descriptors one message carries: the kernel's
// SCM_MAX_FD is 253.
const MaxFds = 253

// MaxMsg bounds a message: MaxFds keys of a workload name and a nonce.
const MaxMsg = 64 << 10

// IOTimeout bounds an exchange with the holder: it answers at once or
// is taken for gone.
const IOTimeout = 10 * time.Second

// Send writes one message: op, the keys, and their descriptors.
func Send(c *net.UnixConn, op byte, keys []string, fds []int) error {
	b := append([]byte{op}, strings.Join(keys, "\n")...)
	if len(b) > MaxMsg {
		return fmt.Errorf("log holder message of %d bytes", len(b))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = c.SetWriteDeadline(time.Now().Add(IOTimeout))
	_, _, err := c.WriteMsgUnix(b, oob, nil)
	return err
}

// recvBufs are Recv's buffers, used again: a message may take MaxMsg,
// and one made for each exchange was most of what a batch start left to
// the collector.
var recvBufs = sync.Pool{New: func() any { return new(recvBuf) }}

type recvBuf struct {
	msg [MaxMsg + 1]byte
	oob [(MaxFds*4 + 64)]byte
}

// Recv reads one message; its descriptors are the caller's to close.
func Recv(c *net.UnixConn, deadline time.Time) (op byte, keys []string, fds []int, err error) {
	rb := recvBufs.Get().(*recvBuf)
	defer recvBufs.Put(rb)
	buf, oob := rb.msg[:], rb.oob[:unix.CmsgSpace(MaxFds*4)]
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
		CloseAll(fds)
		return 0, nil, nil, errors.New("log holder: connection closed")
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		CloseAll(fds)
		return 0, nil, nil, errors.New("log holder: message truncated")
	}
	if n > 1 {
		keys = strings.Split(string(buf[1:n]), "\n")
	}
	if len(fds) > 0 && len(fds) != len(keys) {
		CloseAll(fds)
		return 0, nil, nil, fmt.Errorf("log holder: %d keys and %d descriptors", len(keys), len(fds))
	}
	return buf[0], keys, fds, nil
}

// CloseAll closes the descriptors a message brought.
func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// PeerAllowed is the holder's and the daemon's check of each other:
// root, or the same user.
func PeerAllowed(c *net.UnixConn) error {
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
