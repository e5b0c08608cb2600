package supervisor

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestStopIsOvertaken: a stop waiting out an hour's grace for a program
// that ignores SIGTERM is overtaken by a kill, SIGKILL, a remove and the
// daemon's shutdown: each ends the run at once, and the stop returns too.
func TestStopIsOvertaken(t *testing.T) {
	for _, tt := range []struct {
		name     string
		overtake func(s *Supervisor) error
	}{
		{"kill", func(s *Supervisor) error { _, err := s.Kill(context.Background(), "stubborn"); return err }},
		{"signal KILL", func(s *Supervisor) error { return s.Signal(context.Background(), "stubborn", syscall.SIGKILL) }},
		{"remove", func(s *Supervisor) error { return s.Remove(context.Background(), "stubborn", RemoveOptions{}) }},
		{"shutdown", func(s *Supervisor) error { shut(s); return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, newDirs(t), false)
			defer shut(s)
			ctx := context.Background()
			w := startStubborn(t, s)
			stopped := make(chan error, 1)
			go func() { _, err := s.Stop(ctx, "stubborn"); stopped <- err }()
			waitState(t, s, "stubborn", status.Stopping)
			done := make(chan error, 1)
			go func() { done <- tt.overtake(s) }()
			for _, c := range []chan error{done, stopped} {
				select {
				case err := <-c:
					if err != nil && c == done {
						t.Errorf("overtaking: %v", err)
					}
				case <-time.After(killWait):
					t.Fatalf("the stop was not overtaken within %s", killWait)
				}
			}
			if alive(w.PID) {
				t.Errorf("pid %d survived", w.PID)
			}
		})
	}
}

// startStubborn runs a workload that ignores SIGTERM and whose stop would
// wait an hour before it kills.
func startStubborn(t *testing.T, s *Supervisor) *status.Workload {
	t.Helper()
	sp := shSpec("stubborn", "trap '' TERM; echo ready; exec sleep 100")
	sp.Stop.Timeout = spec.Duration{Duration: spec.MaxStopTimeout}
	w, err := s.Apply(context.Background(), sp, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "stubborn", "ready")
	return w
}

// TestKillWithoutGrace: a kill of a running workload does not wait for
// the grace period it would give a stop.
func TestKillWithoutGrace(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	w := startStubborn(t, s)
	got, err := s.Kill(ctx, "stubborn")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != status.Stopped || got.LastExit == nil || got.LastExit.Signal != "SIGKILL" || got.Reason != "killed by request" {
		t.Errorf("after kill: %s (%s), last exit %+v", got.State, got.Reason, got.LastExit)
	}
	if alive(w.PID) {
		t.Errorf("pid %d survived the kill", w.PID)
	}
}

// TestExecCheckRunsAsTheWorkloadsUser: a workload run as nobody is checked
// as nobody, never as root.
func TestExecCheckRunsAsTheWorkloadsUser(t *testing.T) {
	testenv.RequireRoot(t, "the workload runs as nobody")
	s := open(t, newDirs(t), true)
	defer shut(s)
	sp := shSpec("checked", "exec sleep 100")
	sp.User = "nobody"
	sp.Health = &spec.Health{Exec: []string{"/bin/sh", "-c", `test "$(id -u)" = 65534`},
		Interval: spec.Duration{Duration: spec.MinHealthInterval}, Timeout: spec.Duration{Duration: time.Second}, Failures: 1}
	if _, err := s.Apply(context.Background(), sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := s.Get(context.Background(), "checked")
		if err != nil {
			t.Fatal(err)
		}
		if w.Healthy != nil && *w.Healthy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never healthy: %+v", w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
