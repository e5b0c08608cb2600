package health

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
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
// one heard said changes nothing the supervisor keeps and is not passed
// on to it (On); only a watchdog hears it (Every): a keepalive is the same
// message again, and costs the watchdog a lock and a timer's reset.
type Notify struct {
	conn *net.UnixConn
	path string
	done chan struct{}
	once sync.Once
}

// Message is what one datagram said, of what flyd takes: sd_notify's
// READY=1, STOPPING=1, STATUS=, RELOADING=1, WATCHDOG=1, WATCHDOG=trigger
// and EXTEND_TIMEOUT_USEC=.
type Message struct {
	Ready, Stopping bool
	Status          string
	Reloading       bool
	Watchdog        bool          // a keepalive
	Trigger         bool          // WATCHDOG=trigger: the program failed
	Extend          time.Duration // EXTEND_TIMEOUT_USEC
}

// forSupervisor says whether m says anything On is for.
func (m Message) forSupervisor() bool {
	return m.Ready || m.Stopping || m.Status != ""
}

// NotifyHandlers are what a notify socket tells of what it hears. Each is
// called on the socket's one reading goroutine, in order.
type NotifyHandlers struct {
	// Belongs says whether a sender is a process of the workload.
	Belongs func(pid int32) bool
	// On hears each message of the workload's that says something for the
	// supervisor (READY=1, STOPPING=1, STATUS=) and is not the same as the
	// last one heard.
	On func(Message)
	// Every, if not nil, hears every message of the workload's, repeats
	// included: the watchdog's (Watchdog.Hear).
	Every func(Message)
	// Refused, if not nil, is told of a datagram from anyone else.
	Refused func(pid int32)
}

// ListenNotify binds a datagram socket at path, owned by uid (the
// workload's user, who must be able to send to it) and by nobody else's
// reach (0600), replacing a socket left there, and tells h of what it
// hears, on a goroutine of its own.
func ListenNotify(path string, uid int, h NotifyHandlers) (*Notify, error) {
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
	go n.read(h)
	return n, nil
}

// NotifyRate is how many datagrams a second a notify socket is read at
// most: far more than a program that tells its state needs.
const NotifyRate = 64

func (n *Notify) read(h NotifyHandlers) {
	defer close(n.done)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	var last []byte
	var said Message // what last said
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
		if !ok || !h.Belongs(cred.Pid) {
			if h.Refused != nil {
				h.Refused(cred.Pid)
			}
			continue
		}
		if last != nil && bytes.Equal(last, buf[:nb]) {
			// Said again: news to a watchdog only, which needs no parse.
			if h.Every != nil {
				h.Every(said)
			}
			continue
		}
		last = append(last[:0], buf[:nb]...)
		said = parseNotify(buf[:nb])
		if h.Every != nil {
			h.Every(said)
		}
		if said.forSupervisor() {
			h.On(said)
		}
	}
}

// maxExtend bounds EXTEND_TIMEOUT_USEC, so that a deadline a program
// pushes as far as it can still is a time.
const maxExtend = time.Duration(1<<63-1) / 2

// parseNotify reads a datagram's assignments, one a line.
func parseNotify(b []byte) Message {
	var m Message
	for _, line := range bytes.Split(b, []byte("\n")) {
		switch k, v, _ := strings.Cut(string(line), "="); {
		case k == "READY" && v == "1":
			m.Ready = true
		case k == "STOPPING" && v == "1":
			m.Stopping = true
		case k == "STATUS":
			m.Status = v
		case k == "RELOADING" && v == "1":
			m.Reloading = true
		case k == "WATCHDOG" && v == "1":
			m.Watchdog = true
		case k == "WATCHDOG" && v == "trigger":
			m.Trigger = true
		case k == "EXTEND_TIMEOUT_USEC":
			if us, err := strconv.ParseUint(v, 10, 64); err == nil {
				m.Extend = time.Duration(min(us, uint64(maxExtend/time.Microsecond))) * time.Microsecond
			}
		}
	}
	return m
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
