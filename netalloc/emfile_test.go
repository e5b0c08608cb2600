package netalloc

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv switches a re-run of this test binary into the child side of
// a test that must change process-wide state, like the descriptor limit.
const helperEnv = "FLYD_NETALLOC_HELPER"

// TestTemporaryPortDescriptorTableFull runs the allocation in a child
// process whose descriptor table is full, so the real socket() fails with
// EMFILE; lowering the limit here would break the rest of the suite.
func TestTemporaryPortDescriptorTableFull(t *testing.T) {
	if os.Getenv(helperEnv) == "emfile" {
		emfileChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTemporaryPortDescriptorTableFull$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=emfile")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTemporaryPortDescriptorTableFull") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func emfileChild(t *testing.T) {
	m, err := NewManager("") // a table file could not be opened either
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProbe{}
	m.bindLoopback = func() (loopbackProbe, error) {
		f.attempts.Add(1)
		return bindLoopback()
	}

	// The runtime creates its epoll descriptor on the first pollable
	// descriptor or blocking timer, and dies if it cannot; a daemon has
	// long made one, so make it here too. (A timer alone may not: one that
	// has fired before its channel is read never reaches the poller.)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The limit bounds descriptor numbers, not their count: set it to the
	// lowest free number, and every new descriptor is over it.
	full := unix.Rlimit{Cur: uint64(lowestFreeFD(t)), Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &full); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.AllocateTemporaryPort(context.Background(), "host", nil, "w", "http")
	elapsed := time.Since(start)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}

	if !errors.Is(err, ErrTemporaryPortUnavailable) || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("err = %v, want ErrTemporaryPortUnavailable wrapping EMFILE", err)
	}
	if n := f.attempts.Load(); n != maxAttempts {
		t.Errorf("%d attempts, want %d", n, maxAttempts)
	}
	// The backoff between attempts adds up to 1+2+4+8+16+32+50 ms.
	if elapsed < 100*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("gave up after %v, want the bounded backoff (~113ms)", elapsed)
	}
	t.Logf("limit %d: %v after %v", full.Cur, err, elapsed)
}

func lowestFreeFD(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	open := map[int]bool{}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			open[n] = true
		}
	}
	// The descriptor ReadDir used is closed again, and listed: check it.
	for fd := 0; ; fd++ {
		if !open[fd] {
			return fd
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return fd
		}
	}
}
