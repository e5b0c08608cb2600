package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// fakeDriver is a native runtime without processes, for the
// supervisor's policy tests: what a run does is its command's words,
//
//	exit N     ends at once with code N
//	run        runs until a stop signal (TERM, INT, QUIT) or a kill
//	stubborn   runs until a kill
//
// and failStarts makes the next starts fail as a runtime that is down
// does. Runs end exactly when the policy under test says, with no
// program, shell or sleep in between. What it cannot stand for, the
// kernel's side of a run (process groups, cgroups, adoption by pid), the
// tests with the real native driver and drivertest's contract cover.
type fakeDriver struct {
	mu         sync.Mutex
	failStarts int
	starts     int
	nextPID    int
	runs       map[int]*fakeRun // live and released runs, for Recover
}

func newFakeDriver() *fakeDriver { return &fakeDriver{nextPID: 1 << 22, runs: map[int]*fakeRun{}} }

var errFakeDown = errors.New("the fake runtime is down")

func (d *fakeDriver) Kind() spec.Kind { return spec.KindNative }

func (d *fakeDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{RuntimeContext: "native"}
}

func (d *fakeDriver) Start(ctx context.Context, t *driver.Task) (driver.Process, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starts++
	if d.failStarts > 0 {
		d.failStarts--
		return nil, errFakeDown
	}
	d.nextPID++
	r := &fakeRun{d: d, done: make(chan struct{}), st: driver.State{Driver: spec.KindNative, PID: d.nextPID, StartedAt: time.Now(), Version: 1}}
	switch args := t.Args; {
	case len(args) == 2 && args[0] == "exit":
		code, err := strconv.Atoi(args[1])
		if err != nil {
			return nil, fmt.Errorf("%w: exit %q", driver.ErrExec, args[1])
		}
		r.end(driver.Exit{Code: code})
	case len(args) == 1 && (args[0] == "run" || args[0] == "stubborn"):
		r.stubborn = args[0] == "stubborn"
	default:
		return nil, fmt.Errorf("%w: the fake runs no %q", driver.ErrExec, args)
	}
	d.runs[r.st.PID] = r
	return r, nil
}

func (d *fakeDriver) Recover(ctx context.Context, st driver.State) (driver.Process, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.runs[st.PID]
	if !ok || r.ended() {
		return nil, fmt.Errorf("%w: fake run %d", errdefs.ErrNotFound, st.PID)
	}
	return r, nil
}

// startCount is how many starts were asked for, failed ones too.
func (d *fakeDriver) startCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.starts
}

type fakeRun struct {
	d        *fakeDriver
	st       driver.State
	stubborn bool
	once     sync.Once
	done     chan struct{}
	exit     driver.Exit
}

func (r *fakeRun) end(e driver.Exit) {
	r.once.Do(func() {
		e.At = time.Now()
		r.exit = e
		close(r.done)
	})
}

func (r *fakeRun) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *fakeRun) State() driver.State                 { return r.st }
func (r *fakeRun) Done() <-chan struct{}               { return r.done }
func (r *fakeRun) Exit() driver.Exit                   { return r.exit }
func (r *fakeRun) Release()                            {}
func (r *fakeRun) SignalMain(sig syscall.Signal) error { return r.Signal(sig) }

func (r *fakeRun) Signal(sig syscall.Signal) error {
	switch {
	case sig == syscall.SIGKILL:
		return r.Kill()
	case !r.stubborn && (sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT):
		r.end(driver.Exit{Signal: unix.SignalName(sig)})
	}
	return nil
}

func (r *fakeRun) Kill() error {
	r.end(driver.Exit{Signal: "SIGKILL"})
	return nil
}

// openFake is a supervisor whose only runtime is d.
func openFake(t testing.TB, d *fakeDriver) *Supervisor {
	t.Helper()
	dirs := t.TempDir()
	s, err := newSupervisor(Config{StateDir: dirs + "/state", RunDir: dirs + "/run", Drivers: []driver.Driver{d}, StopOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeSpec is a workload of the fake runtime, with fast restarts.
func fakeSpec(name string, command ...string) *spec.Workload {
	w := shSpec(name, "")
	w.Command = command
	return w
}

// TestStateSetAgainKeepsItsTime: a state set again with a new reason (a
// pull's progress while preparing) keeps the time it was entered; another
// state takes its own.
func TestStateSetAgainKeepsItsTime(t *testing.T) {
	s := openFake(t, newFakeDriver())
	t.Cleanup(func() { s.Close() })
	if _, err := s.Apply(context.Background(), fakeSpec("prep", "run"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.lookup("prep")
	if err != nil {
		t.Fatal(err)
	}
	w.setState(status.Preparing, "pulling: 1/3 layers")
	entered := w.snapshot(false).Since
	time.Sleep(10 * time.Millisecond)
	w.setState(status.Preparing, "pulling: 2/3 layers")
	if v := w.snapshot(false); !v.Since.Equal(entered) || v.Reason != "pulling: 2/3 layers" {
		t.Errorf("preparing again: since %s (entered %s), reason %q", v.Since, entered, v.Reason)
	}
	w.setState(status.Stopped, "")
	if v := w.snapshot(false); !v.Since.After(entered) {
		t.Errorf("another state kept the time %s of the one before", v.Since)
	}
}
