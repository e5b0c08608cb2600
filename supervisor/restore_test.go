package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/backoff"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/status"
)

// unreachable is the native runtime behind a switch: while down, it cannot
// tell whether a run is alive, as a containerd that has not started yet.
type unreachable struct {
	native.Driver
	down *atomic.Bool
}

func (u unreachable) Recover(ctx context.Context, st driver.State) (driver.Process, error) {
	if u.down.Load() {
		return nil, fmt.Errorf("%w: the runtime does not answer", errdefs.ErrRuntimeUnavailable)
	}
	return u.Driver.Recover(ctx, st)
}

// TestUnreachableRunIsAdoptedLater: a run whose runtime does not answer when
// the supervisor starts is neither restarted nor forgotten; it shows as
// unknown, refuses what needs it, and is adopted once the runtime answers.
func TestUnreachableRunIsAdoptedLater(t *testing.T) {
	was := adoptBackoff
	adoptBackoff = backoff.Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	defer func() { adoptBackoff = was }()
	d := newDirs(t)
	ctx := context.Background()
	s := open(t, d, false)
	first, err := s.Apply(ctx, shSpec("db", "echo started; exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "db", "started")
	shut(s)

	var down atomic.Bool
	down.Store(true)
	s, err = newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: []driver.Driver{unreachable{down: &down}}, StopOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer shut(s)
	w := waitState(t, s, "db", status.Unknown)
	if !strings.Contains(w.Reason, "cannot adopt its run") || w.PID != 0 {
		t.Errorf("unknown with reason %q, pid %d", w.Reason, w.PID)
	}
	if _, err := s.Stop(ctx, "db"); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("stop of an unreachable run: %v, want runtime unavailable", err)
	}
	if err := s.Remove(ctx, "db", RemoveOptions{}); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("remove of an unreachable run: %v, want runtime unavailable", err)
	}
	if _, err := s.Start(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several retries
	if w := waitState(t, s, "db", status.Unknown); w.Restarts != 0 {
		t.Errorf("%d restarts while the run could not be adopted", w.Restarts)
	}
	if !alive(first.PID) {
		t.Fatal("the unreachable run was killed")
	}

	down.Store(false)
	w = waitState(t, s, "db", status.Running)
	if w.PID != first.PID || w.Restarts != 0 || !w.Since.Equal(*first.StartedAt) {
		t.Errorf("adopted late: pid %d restarts %d since %s; want pid %d, no restart, since %s", w.PID, w.Restarts, w.Since, first.PID, first.StartedAt)
	}
	var b strings.Builder
	if err := s.Logs(ctx, "db", logfile.Query{Tail: -1}, writeLog(&b)); err != nil || strings.Count(b.String(), "started") != 1 {
		t.Errorf("log %q (%v): want one run", b.String(), err)
	}
	if _, err := s.Stop(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if alive(first.PID) {
		t.Error("the late-adopted run survived stop")
	}
}
