package health

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/sandbox/cgtest"
	"github.com/flyd-dev/flyd/spec"
)

// startSession starts a process in a session of its own, killed at the
// end of the test.
func startSession(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestSessionOf(t *testing.T) {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := SessionOf(os.Getpid()); got != sid {
		t.Fatalf("SessionOf(self) = %d, want %d", got, sid)
	}
	cmd := startSession(t)
	if got := SessionOf(cmd.Process.Pid); got != cmd.Process.Pid {
		t.Fatalf("SessionOf(a session leader) = %d, want its pid %d", got, cmd.Process.Pid)
	}
	if got := SessionOf(1 << 30); got != 0 {
		t.Fatalf("SessionOf(no process) = %d, want 0", got)
	}
}

// TestRunMemberBySession: without cgroups, the processes of the run's
// session are its own, and no other.
func TestRunMemberBySession(t *testing.T) {
	cmd := startSession(t)
	member := RunMember(nil, "w", func() int { return cmd.Process.Pid })
	if !member(int32(cmd.Process.Pid)) {
		t.Error("the run's main process is not its member")
	}
	if member(int32(os.Getpid())) {
		t.Error("a process of another session is the run's member")
	}
	if member(1 << 30) {
		t.Error("a process that is gone is the run's member")
	}
}

// TestRunMemberByCgroup: with cgroups, the workload's cgroup says, and
// the run's session does not.
func TestRunMemberByCgroup(t *testing.T) {
	requireRoot(t)
	cgs, g := cgtest.New(t, "w", sandbox.Limits{})
	in, out := startSession(t), startSession(t)
	procs := filepath.Join(g.Path, "cgroup.procs") // the primary hierarchy's, which Contains reads
	if err := os.WriteFile(procs, []byte(strconv.Itoa(in.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Process.Kill(); _ = in.Wait() }) // before the cgroup's Delete
	member := RunMember(cgs, "w", func() int { return out.Process.Pid })
	if !member(int32(in.Process.Pid)) {
		t.Error("a process in the workload's cgroup is not the run's")
	}
	if member(int32(out.Process.Pid)) {
		t.Error("a process outside the workload's cgroup is the run's, by its session")
	}
}

func TestNotifyEnv(t *testing.T) {
	env := map[string]string{}
	NotifyEnv(env, "/run/n.sock", 0)
	if !maps.Equal(env, map[string]string{"NOTIFY_SOCKET": "/run/n.sock"}) {
		t.Fatalf("without a watchdog: %v", env)
	}
	NotifyEnv(env, "/run/n.sock", 1500*time.Millisecond)
	if env["WATCHDOG_USEC"] != "1500000" {
		t.Fatalf("with a watchdog of 1.5s: %v", env)
	}
}

// TestWithWatchdogPID: a watchdog program learns its own pid; a program
// without a watchdog, or one not found, is left as it is.
func TestWithWatchdogPID(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin"}
	args := []string{"sh", "-c", `[ "$WATCHDOG_PID" = "$$" ]`}
	watchdog := &spec.Health{Watchdog: spec.Duration{Duration: time.Second}}
	for _, h := range []*spec.Health{nil, {}} {
		if got := WithWatchdogPID(args, env, h); !slices.Equal(got, args) {
			t.Errorf("without a watchdog (%+v): %q", h, got)
		}
	}
	missing := []string{"no-such-program-here"}
	if got := WithWatchdogPID(missing, env, watchdog); !slices.Equal(got, missing) {
		t.Errorf("a program not found: %q", got)
	}
	if got := WithWatchdogPID(nil, env, watchdog); got != nil {
		t.Errorf("no program: %q", got)
	}
	got := WithWatchdogPID(args, env, watchdog)
	if got[0] != shell {
		t.Fatalf("with a watchdog: %q", got)
	}
	cmd := exec.Command(got[0], got[1:]...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the program did not find its pid in WATCHDOG_PID: %v %s", err, out)
	}
}

// send sends msg to the notify socket at path from this process.
func send(t *testing.T, path, msg string) {
	t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// TestRunNotify: the run's messages are heard and its watchdog with
// them; others' are refused, counted, and said once a while.
func TestRunNotify(t *testing.T) {
	type refusal struct {
		total, unsaid int
		say           bool
	}
	var mu sync.Mutex
	var heard []Message
	var refusals []refusal
	changed := make(chan struct{}, 16)
	belongs := true
	path := filepath.Join(t.TempDir(), "n.sock")
	n, d, err := RunNotify{
		Path: path, Watchdog: 20 * time.Millisecond,
		Belongs: func(int32) bool { mu.Lock(); defer mu.Unlock(); return belongs },
		On:      func(m Message) { mu.Lock(); heard = append(heard, m); mu.Unlock() },
		Refused: func(pid int32, total, unsaid int, say bool) {
			if pid != int32(os.Getpid()) {
				t.Errorf("refused pid %d, want %d", pid, os.Getpid())
			}
			mu.Lock()
			refusals = append(refusals, refusal{total, unsaid, say})
			mu.Unlock()
		},
		WatchdogChanged: func() { changed <- struct{}{} },
	}.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	defer d.Stop()
	if d == nil {
		t.Fatal("no watchdog with a period")
	}
	send(t, path, "READY=1\nSTATUS=up")
	select {
	case <-changed: // armed, and then missed: no keepalive comes
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog never spoke")
	}
	mu.Lock()
	belongs = false
	mu.Unlock()
	for range 3 {
		send(t, path, "READY=1")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := len(refusals) == 3
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || !heard[0].Ready || heard[0].Status != "up" {
		t.Errorf("heard %+v, want the one READY=1 with its status", heard)
	}
	want := []refusal{{1, 1, true}, {2, 1, false}, {3, 2, false}}
	if !slices.Equal(refusals, want) {
		t.Errorf("refusals %+v, want %+v", refusals, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}

// TestRunNotifyWithoutWatchdog: no period, no watchdog; a socket that
// cannot be bound is an error.
func TestRunNotifyWithoutWatchdog(t *testing.T) {
	n, d, err := RunNotify{Path: filepath.Join(t.TempDir(), "n.sock"), Belongs: func(int32) bool { return true }, On: func(Message) {}}.Listen()
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if d != nil {
		t.Error("a watchdog without a period")
	}
	_, _, err = RunNotify{Path: filepath.Join(t.TempDir(), "no", "dir", "n.sock"), Watchdog: time.Second}.Listen()
	if err == nil || !strings.Contains(err.Error(), "notify socket") {
		t.Fatalf("err = %v, want the socket's", err)
	}
}
