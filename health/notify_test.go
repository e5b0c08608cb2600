package health

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// flood sends msg to the socket at path as fast as the socket takes it,
// for d, without ever blocking; it returns how many went and how many the
// full queue turned away.
func flood(t *testing.T, path, msg string, d time.Duration) (sent, full int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrUnix{Name: path}
	for end := time.Now().Add(d); time.Now().Before(end); {
		err := unix.Sendto(fd, []byte(msg), 0, to)
		switch {
		case err == nil:
			sent++
		case errors.Is(err, unix.EAGAIN):
			full++
			time.Sleep(100 * time.Microsecond)
		default:
			t.Fatal(err)
		}
	}
	return sent, full
}

// TestNotifyFloodIsBounded: a sender that floods a notify socket, from
// outside the workload or from inside it, is read at no more than
// NotifyRate datagrams a second and is held back by the socket's queue;
// a message that repeats the last one heard is not passed on, and one that
// says something new is.
func TestNotifyFloodIsBounded(t *testing.T) {
	const d = 2 * time.Second
	bound := int(NotifyRate*d.Seconds()) + NotifyRate + NotifyRate/2 // the rate, a burst, and slack

	t.Run("outside", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "n.sock")
		var refused atomic.Int64
		n, err := ListenNotify(path, 0, func(int32) bool { return false },
			func(Message) { t.Error("a message from outside was heard") }, func(int32) { refused.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		sent, full := flood(t, path, "READY=1", d)
		if r := int(refused.Load()); r > bound || r == 0 || full == 0 {
			t.Errorf("%d sent, %d turned away by a full queue, %d read and refused in %v; want at most %d read and the sender held back", sent, full, r, d, bound)
		}
	})

	t.Run("inside", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "n.sock")
		heard := make(chan Message, 1024)
		n, err := ListenNotify(path, 0, func(int32) bool { return true }, func(m Message) { heard <- m }, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if _, full := flood(t, path, "READY=1\nSTATUS=serving", d); full == 0 {
			t.Error("a flood from inside was never held back")
		}
		if len(heard) != 1 {
			t.Errorf("the same message, flooded, was passed on %d times; want once", len(heard))
		}
		// Sent until the queue, still full of the flood, takes it: the
		// reader frees a place every 1/NotifyRate s.
		for sent := 0; sent == 0; {
			sent, _ = flood(t, path, "STATUS=draining", 10*time.Millisecond)
		}
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-heard:
				if m.Status == "draining" {
					return
				}
			case <-deadline:
				t.Fatal("a new message after the flood was never heard")
			}
		}
	})
}
