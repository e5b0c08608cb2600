// Command procwatch waits until the number of processes whose command
// line starts with a prefix reaches a target, and prints the moment it
// did, for scripts/bench/run. It follows the kernel's process events
// (the netlink proc connector: every exec and exit as it happens) instead
// of polling /proc, so it neither takes CPU from what is being measured
// nor adds a polling interval to the figure.
//
//	procwatch -match PREFIX -want ge:N|eq:N [-timeout 120s]
//
// It prints "ready" once it follows the events and has counted the
// processes there are, then, when the count meets the target, the time
// in microseconds since the epoch, and exits 0. Root is needed.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Proc connector constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc        = 1
	cnValProc        = 1
	procCnMcastListn = 1
	procEventExec    = 0x00000002
	procEventExit    = 0x80000000
	nlmsgHdrLen      = 16
	cnMsgLen         = 20
)

func main() {
	match := flag.String("match", "", "command line prefix (argv joined by spaces)")
	want := flag.String("want", "", "ge:N or eq:N")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	flag.Parse()
	op, n, err := parseWant(*want)
	if err != nil || *match == "" {
		fmt.Fprintln(os.Stderr, "usage: procwatch -match PREFIX -want ge:N|eq:N [-timeout D]")
		os.Exit(2)
	}
	if err := run(*match, op, n, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "procwatch:", err)
		os.Exit(1)
	}
}

func parseWant(s string) (string, int, error) {
	op, v, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || (op != "ge" && op != "eq") {
		return "", 0, errors.New("bad -want")
	}
	return op, n, nil
}

func run(prefix, op string, target int, timeout time.Duration) error {
	fd, err := listen()
	if err != nil {
		return fmt.Errorf("proc connector: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	w := watcher{prefix: []byte(prefix), pids: map[int]bool{}}
	w.scan() // after subscribing: nothing is missed, and events are idempotent
	fmt.Println("ready")
	met := func() bool {
		return (op == "ge" && len(w.pids) >= target) || (op == "eq" && len(w.pids) == target)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1<<16)
	for !met() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s with %d processes (want %s %d)", timeout, len(w.pids), op, target)
		}
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS): // events were lost: count afresh
			w.pids = map[int]bool{}
			w.scan()
			continue
		case err != nil:
			return err
		}
		w.handle(buf[:n])
	}
	fmt.Println(time.Now().UnixMicro())
	return nil
}

// listen subscribes to the proc connector's events.
func listen() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: uint32(os.Getpid())}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	le.PutUint32(msg[16:], cnIdxProc)
	le.PutUint32(msg[20:], cnValProc)
	le.PutUint16(msg[32:], 4)
	le.PutUint32(msg[36:], procCnMcastListn)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

type watcher struct {
	prefix []byte
	pids   map[int]bool // the matching processes alive
}

// scan counts the matching processes in /proc.
func (w *watcher) scan() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && w.matches(pid) {
			w.pids[pid] = true
		}
	}
}

func (w *watcher) matches(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), w.prefix)
}

// handle applies the events of one datagram: an exec may start a
// matching process (or turn one into something else), an exit of a
// process (not of a thread) ends it.
func (w *watcher) handle(b []byte) {
	le := binary.LittleEndian
	for len(b) >= nlmsgHdrLen {
		l := int(le.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			return
		}
		ev := b[nlmsgHdrLen:l]
		b = b[(l+3)&^3:]
		if len(ev) < cnMsgLen+16+8 || le.Uint32(ev[0:]) != cnIdxProc {
			continue
		}
		data := ev[cnMsgLen:]
		what := le.Uint32(data[0:])
		pid, tgid := int(le.Uint32(data[16:])), int(le.Uint32(data[20:]))
		switch {
		case what == procEventExec:
			if w.matches(tgid) {
				w.pids[tgid] = true
			} else {
				delete(w.pids, tgid)
			}
		case what == procEventExit && pid == tgid:
			delete(w.pids, tgid)
		}
		if len(b) < nlmsgHdrLen {
			return
		}
	}
}
