// Package drivertest is the contract every runtime's driver must keep,
// as a suite each driver's tests run against the real runtime: exit
// statuses come back, signals reach the program (all of it, or its main
// process alone), a kill ends a program
// that ignores the stop signal, a released run is left alive and adopted
// again, a run that ended is not adopted, and a sweep keeps what it is
// told to. A new runtime passes it before the supervisor meets it. It is
// for tests only.
package drivertest

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
)

// Harness is what a driver gives the suite.
type Harness struct {
	Driver driver.Driver
	// Task is a run of `sh -c script` as the runtime runs it, for workload
	// name, with its output in the task's Log.
	Task func(t *testing.T, name, script string) *driver.Task
	// AdoptedExitKnown says whether a run adopted by Recover reports its
	// real exit status (containerd does), or an unknown one (a host
	// process that is not the daemon's child).
	AdoptedExitKnown bool
}

// wait bounds every wait of the suite.
const wait = 20 * time.Second

// Run runs the contract against h.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	start := func(t *testing.T, name, script string) (*driver.Task, driver.Process) {
		t.Helper()
		tk := h.Task(t, name, script)
		p, err := h.Driver.Start(ctx, tk)
		if err != nil {
			t.Fatal(err)
		}
		return tk, p
	}

	t.Run("exit status", func(t *testing.T) {
		_, p := start(t, "exits", "exit 7")
		if e := done(t, p); e.Code != 7 || e.Signal != "" || e.Unknown || e.Success() {
			t.Fatalf("exit %+v, want code 7", e)
		}
		_, p = start(t, "succeeds", "true")
		if e := done(t, p); !e.Success() {
			t.Fatalf("exit %+v, want success", e)
		}
	})

	t.Run("signal", func(t *testing.T) {
		tk, p := start(t, "signalled", "trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.05; done")
		waitLog(t, tk, "ready")
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if e := done(t, p); e.Code != 3 {
			t.Fatalf("exit %+v, want code 3 from the trap", e)
		}
		waitLog(t, tk, "got-usr1")
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			t.Errorf("a signal to an ended run: %v, want nothing", err)
		}
	})

	t.Run("signal to the main process alone", func(t *testing.T) {
		tk, p := start(t, "master", "trap 'echo main-got' USR1; (trap 'echo child-got' USR1; echo child-ready; while :; do sleep 0.05; done) & "+
			"echo ready; while :; do sleep 0.05; done")
		waitLog(t, tk, "child-ready")
		waitLog(t, tk, "ready")
		if err := p.SignalMain(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		waitLog(t, tk, "main-got")
		time.Sleep(200 * time.Millisecond)
		if b, _ := os.ReadFile(tk.Log.Name()); strings.Contains(string(b), "child-got") {
			t.Errorf("the signal for the main process reached its child:\n%s", b)
		}
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		waitLog(t, tk, "child-got")
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		done(t, p)
	})

	t.Run("kill ends what ignores the stop signal", func(t *testing.T) {
		tk, p := start(t, "stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done")
		waitLog(t, tk, "ready")
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
			t.Fatal("a run that ignores SIGTERM ended on it")
		case <-time.After(200 * time.Millisecond):
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if e := done(t, p); e.Success() {
			t.Fatalf("exit %+v after a kill", e)
		}
	})

	t.Run("release and recover", func(t *testing.T) {
		tk, p := start(t, "adopted", "trap 'exit 5' TERM; echo ready; while :; do sleep 0.05; done")
		waitLog(t, tk, "ready")
		st := p.State()
		p.Release()
		q, err := h.Driver.Recover(ctx, st)
		if err != nil {
			t.Fatalf("recover a released run: %v", err)
		}
		if q.State().PID != st.PID {
			t.Errorf("recovered pid %d, want %d", q.State().PID, st.PID)
		}
		if err := q.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		e := done(t, q)
		if h.AdoptedExitKnown && e.Code != 5 {
			t.Errorf("adopted exit %+v, want code 5", e)
		}
		if !h.AdoptedExitKnown && !e.Unknown {
			t.Errorf("adopted exit %+v, want unknown: the run is not the daemon's child", e)
		}
		// The released run was this test's child: reap what is left of it.
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(st.PID, &ws, syscall.WNOHANG, nil)
	})

	t.Run("a run that ended is not adopted", func(t *testing.T) {
		_, p := start(t, "ended", "true")
		st := p.State()
		done(t, p)
		if q, err := h.Driver.Recover(ctx, st); !errors.Is(err, errdefs.ErrNotFound) {
			if q != nil {
				_ = q.Kill()
			}
			t.Fatalf("recover of an ended run: %v, want not found", err)
		}
	})

	if sw, ok := h.Driver.(driver.Sweeper); ok {
		t.Run("sweep keeps what it is told to", func(t *testing.T) {
			tk, p := start(t, "kept", "echo ready; while :; do sleep 0.05; done")
			waitLog(t, tk, "ready")
			if err := sw.Sweep(ctx, map[string]bool{"kept": true}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
				t.Fatal("a sweep ended a run it was told to keep")
			case <-time.After(100 * time.Millisecond):
			}
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			done(t, p)
		})
	}
}

func done(t *testing.T, p driver.Process) driver.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(wait):
		_ = p.Kill()
		t.Fatalf("the run did not end within %s", wait)
		return driver.Exit{}
	}
}

func waitLog(t *testing.T, tk *driver.Task, want string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, _ := os.ReadFile(tk.Log.Name())
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q; it has:\n%s", want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
