package health

import (
	"errors"
	"net"
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
		n, err := ListenNotify(path, 0, NotifyHandlers{
			Belongs: func(int32) bool { return false },
			On:      func(Message) { t.Error("a message from outside was heard") },
			Every:   func(Message) { t.Error("a message from outside was heard") },
			Refused: func(int32) { refused.Add(1) },
		})
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
		var every atomic.Int64
		n, err := ListenNotify(path, 0, NotifyHandlers{
			Belongs: func(int32) bool { return true },
			On:      func(m Message) { heard <- m },
			Every:   func(Message) { every.Add(1) },
		})
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
		if e := int(every.Load()); e > bound || e < 2 {
			t.Errorf("the watchdog heard the flood %d times; want every datagram read, at most %d", e, bound)
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

// TestNotifyKeepalivesRepeat: a watchdog hears every keepalive, though
// each repeats the last message, while the supervisor hears none of them
// and each change once.
func TestNotifyKeepalivesRepeat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.sock")
	on, every := make(chan Message, 16), make(chan Message, 16)
	n, err := ListenNotify(path, 0, NotifyHandlers{
		Belongs: func(int32) bool { return true },
		On:      func(m Message) { on <- m },
		Every:   func(m Message) { every <- m },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := net.Dial("unixgram", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, msg := range []string{"READY=1\nSTATUS=up", "WATCHDOG=1", "WATCHDOG=1", "WATCHDOG=1", "EXTEND_TIMEOUT_USEC=2500000", "RELOADING=1", "READY=1"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	want := []Message{
		{Ready: true, Status: "up"}, {Watchdog: true}, {Watchdog: true}, {Watchdog: true},
		{Extend: 2500 * time.Millisecond}, {Reloading: true}, {Ready: true},
	}
	for i, w := range want {
		select {
		case m := <-every:
			if m != w {
				t.Errorf("message %d heard as %+v, want %+v", i, m, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d never heard", i)
		}
	}
	for _, w := range []Message{{Ready: true, Status: "up"}, {Ready: true}} {
		if m := <-on; m != w {
			t.Errorf("the supervisor heard %+v, want %+v", m, w)
		}
	}
	if len(on) != 0 {
		t.Errorf("the supervisor heard %d more", len(on))
	}
}

func TestParseNotify(t *testing.T) {
	for in, want := range map[string]Message{
		"WATCHDOG=trigger":                         {Trigger: true},
		"WATCHDOG=0":                               {},
		"EXTEND_TIMEOUT_USEC=-1":                   {},
		"EXTEND_TIMEOUT_USEC=18446744073709551615": {Extend: maxExtend / time.Microsecond * time.Microsecond},
		"STATUS=a=b\nSTOPPING=1":                   {Status: "a=b", Stopping: true},
		"RELOADING=1\nMONOTONIC_USEC=12":           {Reloading: true},
	} {
		if got := parseNotify([]byte(in)); got != want {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}
}
