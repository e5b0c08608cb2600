package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ticks  uint64
		zombie bool
		bad    bool
	}{
		{line: "42 (sleep) S 1 42 42 0 -1 4194560 108 0 0 0 0 0 0 0 20 0 1 0 98765 2314240 128 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", ticks: 98765},
		// A name with spaces and parentheses: fields count from the last ')'.
		{line: "7 (a) b) (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n", ticks: 5, zombie: true},
		{line: "7 (x) X 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 6", ticks: 6, zombie: true},
		{line: "7 (x) S 1 7 7", bad: true},
		{line: "7 x S 1", bad: true},
		{line: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0\n", bad: true},
	} {
		got, err := parseStat("stat", []byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.line, got)
			}
			continue
		}
		if err != nil || got.startTicks != tc.ticks || got.zombie != tc.zombie {
			t.Errorf("%q: got %+v, %v; want ticks %d zombie %v", tc.line, got, err, tc.ticks, tc.zombie)
		}
	}
}

func TestReadStatOfSelf(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil || st.startTicks == 0 || st.zombie {
		t.Fatalf("readStat(self) = %+v, %v", st, err)
	}
	if _, err := readStat(1 << 30); !os.IsNotExist(err) {
		t.Fatalf("readStat of no process: %v, want not-exist", err)
	}
}

// orphanZombie starts a shell that forks `sleep` and then becomes a
// `sleep` that never waits: the forked one, once ended, stays a zombie
// until its parent ends after parentFor, and init reaps it. It returns a
// pidfd of the zombie-to-be once it has ended.
func orphanZombie(t *testing.T, parentFor string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 0.05 & echo $!; exec sleep "+parentFor)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(pfd, 5000); err != unix.EINTR {
			break
		}
	}
	if pfd[0].Revents&unix.POLLIN == 0 {
		t.Fatalf("pid %d did not end within 5 s", pid)
	}
	return fd
}

// TestWaitReaped: the wait for another parent's child to be reaped ends
// after the reap, never before it, and gives up at its limit.
func TestWaitReaped(t *testing.T) {
	fd := orphanZombie(t, "30")
	began := time.Now()
	if waitReaped(fd, 300*time.Millisecond) {
		t.Fatal("waitReaped: reaped, while its parent still runs and never waits")
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("waitReaped gave up after %v, before its limit of 300ms", took)
	}

	fd = orphanZombie(t, "0.5")
	began = time.Now()
	if !waitReaped(fd, time.Minute) {
		t.Fatal("waitReaped: not reaped within a minute of its parent's end")
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("waitReaped ended after %v, before the parent (0.5 s) ended", took)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil); !errors.Is(err, unix.ECHILD) {
		t.Errorf("the process is still waitable after waitReaped: %v", err)
	}
}
