package health

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Notify is a workload's own readiness socket, as systemd's Type=notify
// gives a service: the program sends "READY=1" (and "STATUS=…",
// "STOPPING=1") datagrams to the NOTIFY_SOCKET it is given. The kernel
// says who sent each datagram (SCM_CREDENTIALS), and only a process of the
// workload (belongs) is heard.
//
// A socket is read at most NotifyRate datagrams a second (a burst of as
// many): a sender that floods it, from inside the workload or out, fills
// the socket's queue and then waits on it, and costs the daemon no more
// than that rate whatever it sends. A datagram that says what the last
// one heard said changes nothing and is not passed on.
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

// NotifyRate is how many datagrams a second a notify socket is read at
// most: far more than a program that tells its state needs.
const NotifyRate = 64

func (n *Notify) read(belongs func(int32) bool, on func(Message), refused func(int32)) {
	defer close(n.done)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var last []byte
	tokens, at := float64(NotifyRate), time.Now()
	for {
		now := time.Now()
		tokens = min(NotifyRate, tokens+now.Sub(at).Seconds()*NotifyRate)
		at = now
		if tokens < 1 {
			time.Sleep(time.Duration((1 - tokens) / NotifyRate * float64(time.Second)))
			continue
		}
		tokens--
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
		if last != nil && bytes.Equal(last, buf[:nb]) {
			continue
		}
		last = append(last[:0], buf[:nb]...)
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
