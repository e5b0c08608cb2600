package health

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stopped main process fails every check, though its port still accepts;
// continued, it passes again.
func TestAwake(t *testing.T) {
	l := listen(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pid := sleeper.Process.Pid
	p := Awake(func() int { return pid }, TCP(nil, l.Addr().String()))
	if err, _ := check(p, time.Second); err != nil {
		t.Fatalf("running: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { s, _ := Stopped(pid); return s })
	err, _ := check(p, time.Second)
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("stopped: err = %v, want the stop named", err)
	}
	if err := TCP(nil, l.Addr().String()).Check(context.Background()); err != nil {
		t.Fatalf("the port itself should still accept: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { s, _ := Stopped(pid); return !s })
	if err, _ := check(p, time.Second); err != nil {
		t.Fatalf("continued: %v", err)
	}
	// No pid: the probe alone decides.
	if err, _ := check(Awake(func() int { return 0 }, TCP(nil, l.Addr().String())), time.Second); err != nil {
		t.Fatalf("without a pid: %v", err)
	}
}

func TestStoppedGone(t *testing.T) {
	if _, err := Stopped(1 << 30); err == nil {
		t.Fatal("Stopped of a pid that cannot exist: no error")
	}
}
