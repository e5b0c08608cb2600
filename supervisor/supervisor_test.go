package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type dirs struct{ state, run string }

func nativeDrivers() []driver.Driver { return []driver.Driver{native.Driver{}} }

func newDirs(t *testing.T) dirs {
	d := t.TempDir()
	return dirs{filepath.Join(d, "state"), filepath.Join(d, "run")}
}

func open(t *testing.T, d dirs, stopOnClose bool) *Supervisor {
	t.Helper()
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers(), StopOnClose: stopOnClose})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loseSpec deletes a workload's desired state while no supervisor runs.
func loseSpec(t *testing.T, d dirs, name string) {
	t.Helper()
	j, _, err := journal.Open(filepath.Join(d.state, "workloads.journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Delete(name); err != nil {
		t.Fatal(err)
	}
}

// TestImportsOneFilePerWorkload: the state of a daemon from before the
// journal, one NAME.json per workload, is moved into the journal.
func TestImportsOneFilePerWorkload(t *testing.T) {
	d := newDirs(t)
	old := filepath.Join(d.state, "workloads")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	rec, err := json.Marshal(records.Workload{Spec: shSpec("legacy", "exec sleep 100"), Rest: status.Stopped})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "legacy.json"), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, d, true)
	// Stopped from the first look, not pending until its loop has run.
	if w, err := s.Get(context.Background(), "legacy"); err != nil || w.State != status.Stopped {
		t.Fatalf("legacy: %+v, %v; want imported and stopped", w, err)
	}
	shut(s)
	if _, err := os.Stat(filepath.Join(old, "legacy.json")); err == nil {
		t.Fatal("the imported file is still there")
	}
	if _, err := os.Stat(filepath.Join(old, "broken.json")); err != nil {
		t.Fatalf("a file that could not be imported must be left for its owner: %v", err)
	}
	s = open(t, d, true) // from the journal now
	defer shut(s)
	if _, err := s.Get(context.Background(), "legacy"); err != nil {
		t.Fatalf("legacy after a second start: %v", err)
	}
}

// shSpec is a workload running a shell snippet, with fast restarts.
func shSpec(name, script string) *spec.Workload {
	w := &spec.Workload{Name: name, Command: []string{"/bin/sh", "-c", script}}
	w.SetDefaults()
	w.Restart.Backoff.Initial = spec.Duration{Duration: spec.MinBackoff}
	w.Restart.Backoff.Max = spec.Duration{Duration: 2 * spec.MinBackoff}
	w.Stop.Timeout = spec.Duration{Duration: 2 * time.Second}
	return w
}

func waitState(t *testing.T, s *Supervisor, name string, want status.State) *status.Workload {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := s.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if w.State == want {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s, want %s (last error %q)", name, w.State, want, w.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	return err == nil && !containsState(string(b), "Z")
}

func TestRestartPolicyGivesUpAfterMaxRestarts(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	events := s.events.Subscribe(ctx, 0)

	w := fakeSpec("crashy", "exit", "3")
	w.Restart.MaxRestarts = 2
	if _, err := s.Apply(ctx, w, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, s, "crashy", status.Failed)
	if got.Restarts != 2 {
		t.Errorf("restarts = %d, want 2", got.Restarts)
	}
	if got.LastExit == nil || got.LastExit.Code != 3 {
		t.Errorf("last exit = %+v, want code 3", got.LastExit)
	}
	if got.LastError == "" {
		t.Error("a failed workload must say why")
	}
	var seen []status.State
	for len(seen) == 0 || seen[len(seen)-1] != status.Failed {
		ev := <-events
		if ev.Type == status.EventState {
			seen = append(seen, ev.State)
		}
	}
	want := []status.State{status.Starting, status.Running, status.Backoff,
		status.Starting, status.Running, status.Backoff,
		status.Starting, status.Running, status.Failed}
	if len(seen) != len(want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("states %v, want %v", seen, want)
		}
	}
	if n := d.startCount(); n != 3 {
		t.Fatalf("%d starts, want 3", n)
	}
}

// TestRuntimeDownIsRetriedWithBackoff: a start the runtime fails (not
// one the program can never pass) is tried again after the backoff, and
// counts as a restart, until it runs.
func TestRuntimeDownIsRetriedWithBackoff(t *testing.T) {
	d := newFakeDriver()
	d.failStarts = 2
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	first, err := s.Apply(ctx, fakeSpec("svc", "run"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.State != status.Backoff || !strings.Contains(first.LastError, errFakeDown.Error()) {
		t.Fatalf("after a failed start: state %s, last error %q; want backoff naming the runtime's error", first.State, first.LastError)
	}
	got := waitState(t, s, "svc", status.Running)
	if got.Restarts != 2 || d.startCount() != 3 {
		t.Fatalf("running after %d restarts and %d starts, want 2 and 3", got.Restarts, d.startCount())
	}
	stopped, err := s.Stop(ctx, "svc")
	if err != nil || stopped.LastExit == nil || stopped.LastExit.Signal != "SIGTERM" {
		t.Fatalf("stop: %+v, %v; want ended by SIGTERM", stopped, err)
	}
}

func TestCleanExitIsNotRestartedOnFailure(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	if _, err := s.Apply(context.Background(), fakeSpec("oneshot", "exit", "0"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, s, "oneshot", status.Exited)
	if got.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", got.Restarts)
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	// SIG_IGN survives exec, so sleep ignores SIGTERM too.
	w := shSpec("stubborn", `trap "" TERM; echo ready; exec sleep 100`)
	w.Stop.Timeout = spec.Duration{Duration: 100 * time.Millisecond}
	started, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "stubborn", "ready")
	stopped, err := s.Stop(ctx, "stubborn")
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != status.Stopped || stopped.LastExit == nil || stopped.LastExit.Signal != "SIGKILL" {
		t.Fatalf("after stop: state %s, last exit %+v; want stopped by SIGKILL", stopped.State, stopped.LastExit)
	}
	if alive(started.PID) {
		t.Fatalf("pid %d still alive after stop", started.PID)
	}
}

func TestApplyIsIdempotentAndReplaces(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	first, err := s.Apply(ctx, shSpec("svc", "exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Apply(ctx, shSpec("svc", "exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.PID != first.PID {
		t.Fatalf("an identical apply restarted the workload: pid %d → %d", first.PID, again.PID)
	}
	changed, err := s.Apply(ctx, shSpec("svc", "exec sleep 101"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if changed.PID == first.PID || alive(first.PID) {
		t.Fatalf("a changed spec must replace the run: old pid %d, new pid %d", first.PID, changed.PID)
	}
	list := s.List(ctx)
	if len(list) != 1 {
		t.Fatalf("%d workloads after three applies of one name", len(list))
	}
}

func TestExecFailureFailsAtOnce(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	w := shSpec("missing", "")
	w.Command = []string{"/nonexistent/prog"}
	got, err := s.Apply(context.Background(), w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != status.Failed || got.Restarts != 0 {
		t.Fatalf("state %s, restarts %d; want failed without restarts", got.State, got.Restarts)
	}
	if want := "/nonexistent/prog"; !contains(got.LastError, want) {
		t.Fatalf("last error %q does not name %s", got.LastError, want)
	}
}

func TestRestartedDaemonAdoptsAndSweeps(t *testing.T) {
	d := newDirs(t)
	ctx := context.Background()
	s := open(t, d, false)
	kept, err := s.Apply(ctx, shSpec("kept", "exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := s.Apply(ctx, shSpec("orphan", "exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	shut(s)
	if !alive(kept.PID) || !alive(orphan.PID) {
		t.Fatal("closing the supervisor must leave workloads running")
	}
	// The orphan's spec is lost while no daemon runs: its run must not
	// survive the next daemon.
	loseSpec(t, d, "orphan")

	s = open(t, d, true)
	defer shut(s)
	got := waitState(t, s, "kept", status.Running)
	if got.PID != kept.PID {
		t.Fatalf("pid %d after restart, want the adopted %d", got.PID, kept.PID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(orphan.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("orphan pid %d survived", orphan.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A stop of an adopted run still ends every process of it.
	if _, err := s.Stop(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if alive(kept.PID) {
		t.Fatal("adopted run survived stop")
	}
}

func waitLog(t *testing.T, s *Supervisor, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var b strings.Builder
		if err := s.Logs(context.Background(), name, logfile.Query{Tail: -1}, writeLog(&b)); err == nil && strings.Contains(b.String(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never logged %q", name, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAfterWaitsForDependencies(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	db := shSpec("db", "exec sleep 100")
	if _, err := s.Apply(ctx, db, ApplyOptions{Start: false}); err != nil {
		t.Fatal(err)
	}
	api1 := shSpec("api", "exec sleep 100")
	api1.After = []string{"db"}
	got, err := s.Apply(ctx, api1, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "pending" || got.PID != 0 || got.Reason != "waiting for db" {
		t.Fatalf("api started before db runs: %s (%s) pid %d", got.State, got.Reason, got.PID)
	}
	if _, err := s.Start(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "api", "running")

	// A cycle and a name that exists nowhere are refused at apply.
	cyc := shSpec("db", "exec sleep 100")
	cyc.After = []string{"api"}
	if _, err := s.Apply(ctx, cyc, ApplyOptions{Start: true}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cycle was accepted: %v", err)
	}
	lone := shSpec("lone", "exec sleep 100")
	lone.After = []string{"ghost"}
	if _, err := s.Apply(ctx, lone, ApplyOptions{Start: true}); err == nil || !strings.Contains(err.Error(), "after[0]") {
		t.Fatalf("an unknown name was accepted: %v", err)
	}
}

func TestOwnedWorkloadsChangeOnlyThroughTheirFile(t *testing.T) {
	s := open(t, newDirs(t), true)
	defer shut(s)
	ctx := context.Background()
	if _, err := s.Apply(ctx, shSpec("owned", "exec sleep 100"), ApplyOptions{Start: true, Owner: "owned.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, shSpec("owned", "exec sleep 101"), ApplyOptions{Start: true}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("the API changed a file's workload: %v", err)
	}
	if err := s.Remove(ctx, "owned", RemoveOptions{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("the API removed a file's workload: %v", err)
	}
	if _, err := s.Apply(ctx, shSpec("owned", "exec sleep 101"), ApplyOptions{Start: true, Force: true}); err != nil {
		t.Fatalf("force: %v", err)
	}
	owned, _ := s.Owned(ctx)
	if owned["owned"] != "owned.yaml" {
		t.Fatalf("owned = %v", owned)
	}
	if err := s.DeleteOwned(ctx, "owned", "owned.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOwned(ctx, "owned", "owned.yaml"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
}

// TestBatchStopSetsEveryWorkloadStopping: a batch stop sends every
// workload its stop signal before it waits for any to end, so no stop
// waits for another's grace period. Here none of the runs heeds SIGTERM:
// each stays stopping until the kill that follows.
func TestBatchStopSetsEveryWorkloadStopping(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	// Should the test fail, nothing is left stopping for an hour.
	defer s.Batch(ctx, ActionStop, BatchRequest{All: true, Force: true})
	n := 3 * batchParallel
	var names []string
	for i := range n {
		w := fakeSpec(fmt.Sprintf("stubborn-%d", i), "stubborn")
		w.Stop.Timeout.Duration = time.Hour
		if _, err := s.Apply(ctx, w, ApplyOptions{Start: true}); err != nil {
			t.Fatal(err)
		}
		names = append(names, w.Name)
	}
	stopped := make(chan []Outcome, 1)
	go func() {
		rs, err := s.Batch(ctx, ActionStop, BatchRequest{All: true})
		if err != nil {
			t.Error(err)
		}
		stopped <- rs
	}()
	for _, name := range names {
		waitState(t, s, name, status.Stopping)
	}
	killed, err := s.Batch(ctx, ActionStop, BatchRequest{Names: names, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, outs := range [][]Outcome{killed, <-stopped} {
		for _, o := range outs {
			if o.Err != nil || o.Workload == nil || o.Workload.State != status.Stopped {
				t.Errorf("%s: %+v, %v; want stopped", o.Name, o.Workload, o.Err)
			}
		}
	}
}

// TestBatchRefusesANameTwice: a batch naming one workload twice is refused
// whole, as an apply of one spec twice is, and nothing of it runs.
func TestBatchRefusesANameTwice(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	if _, err := s.Apply(ctx, fakeSpec("web", "stubborn"), ApplyOptions{Start: false}); err != nil {
		t.Fatal(err)
	}
	for _, action := range []Action{ActionStart, ActionStop, ActionRestart, ActionRemove} {
		rs, err := s.Batch(ctx, action, BatchRequest{Names: []string{"web", "web"}})
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `"web" is named twice`) || rs != nil {
			t.Errorf("%s web web: %v, %v; want refused naming web", action, rs, err)
		}
	}
	if w, err := s.Get(ctx, "web"); err != nil || w.State != status.Stopped {
		t.Errorf("web after the refused batches: %+v, %v; want there, never started", w, err)
	}
}

// TestBatchStopIsOneJournalWrite: a batch stop records its workloads'
// states at rest together, in one journal write (two if the machine is
// slow enough that exits straddle the group's linger), not one each, and
// every one of them is found stopped by the next daemon.
func TestBatchStopIsOneJournalWrite(t *testing.T) {
	d := newDirs(t)
	fd := newFakeDriver()
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: []driver.Driver{fd}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 3 * batchParallel
	for i := range n {
		if _, err := s.Apply(ctx, fakeSpec(fmt.Sprintf("w-%d", i), "run"), ApplyOptions{Start: true}); err != nil {
			t.Fatal(err)
		}
	}
	before := s.store.Commits()
	started := time.Now()
	outs, err := s.Batch(ctx, ActionStop, BatchRequest{All: true, Parallel: true})
	took := time.Since(started)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.Err != nil || o.Workload.State != status.Stopped {
			t.Fatalf("%s: %+v, %v", o.Name, o.Workload, o.Err)
		}
	}
	// One write, or, where the stops straggle (an emulated machine), one
	// more each time the group's wait ran out while they did.
	if got, most := s.store.Commits()-before, 2+uint64(took/records.GroupLinger); got > most {
		t.Errorf("a batch stop of %d made %d journal writes in %s, want 1 (at most %d)", n, got, took, most)
	}
	shut(s)
	s, err = newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: []driver.Driver{fd}})
	if err != nil {
		t.Fatal(err)
	}
	defer shut(s)
	for i := range n {
		if w, err := s.Get(ctx, fmt.Sprintf("w-%d", i)); err != nil || w.State != status.Stopped {
			t.Fatalf("w-%d after a restart: %+v, %v", i, w, err)
		}
	}
}
