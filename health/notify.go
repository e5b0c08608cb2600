package health

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Notify is a workload's own readiness socket, as systemd's Type=notify
// gives a service: the program sends "READY=1" (and "STATUS=…",
// "STOPPING=1") datagrams to the NOTIFY_SOCKET it is given. The kernel
// says who sent each datagram (SCM_CREDENTIALS), and only a process of the
// workload (belongs) is heard.
type Notify struct {
	conn *net.UnixConn
	path string
	done chan struct{}
	once sync.Once
}

// Message is what one datagram said.
type Message struct {
	Ready, Stopping bool
	Status          string
}

// ListenNotify binds a datagram socket at path, owned by uid (the
// workload's user, who must be able to send to it) and by nobody else's
// reach (0600), replacing a socket left there, and calls on for every
// message from a process for which belongs is true, on a goroutine of its
// own, in order. refused, if not nil, is told of a datagram from anyone
// else.
func ListenNotify(path string, uid int, belongs func(pid int32) bool, on func(Message), refused func(pid int32)) (*Notify, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	old := unix.Umask(0o177)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	if err := os.Lchown(path, uid, -1); err != nil {
		conn.Close()
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
		err = errors.Join(err, serr)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	n := &Notify{conn: conn, path: path, done: make(chan struct{})}
	go n.read(belongs, on, refused)
	return n, nil
}

func (n *Notify) read(belongs func(int32) bool, on func(Message), refused func(int32)) {
	defer close(n.done)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		nb, noob, _, _, err := n.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return // closed
		}
		cred, ok := sender(oob[:noob])
		if !ok || !belongs(cred.Pid) {
			if refused != nil {
				refused(cred.Pid)
			}
			continue
		}
		var m Message
		for _, line := range bytes.Split(buf[:nb], []byte("\n")) {
			switch k, v, _ := strings.Cut(string(line), "="); {
			case k == "READY" && v == "1":
				m.Ready = true
			case k == "STOPPING" && v == "1":
				m.Stopping = true
			case k == "STATUS":
				m.Status = v
			}
		}
		on(m)
	}
}

// sender reads the kernel's credentials of a datagram's sender.
func sender(oob []byte) (*unix.Ucred, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return &unix.Ucred{}, false
	}
	for _, m := range msgs {
		if cred, err := unix.ParseUnixCredentials(&m); err == nil {
			return cred, true
		}
	}
	return &unix.Ucred{}, false
}

// Close stops listening and removes the socket.
func (n *Notify) Close() {
	n.once.Do(func() {
		n.conn.Close()
		<-n.done
		_ = os.Remove(n.path)
	})
}
