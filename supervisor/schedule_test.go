package supervisor

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// scheduledSpec is a one-shot of the fake runtime on a schedule.
func scheduledSpec(name, schedule string, command ...string) *spec.Workload {
	w := fakeSpec(name, command...)
	w.Schedule = schedule
	w.Restart.Policy = spec.RestartNever
	return w
}

// eventsOf collects the events of one type for a workload from ch until
// stop is closed.
func eventsOf(ch <-chan status.Event, name, typ string) func() []status.Event {
	var got []status.Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			if ev.Workload == name && ev.Type == typ {
				got = append(got, ev)
			}
		}
	}()
	return func() []status.Event { <-done; return got }
}

// TestScheduleArmsAndFires: apply arms a schedule and starts nothing; its
// times start runs, each with an event; stop disarms it; start runs it
// once and arms it again.
func TestScheduleArmsAndFires(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx, cancel := context.WithCancel(context.Background())
	collected := eventsOf(s.events.Subscribe(ctx, 0), "job", status.EventSchedule)

	w, err := s.Apply(ctx, scheduledSpec("job", "@every 1s", "exit", "0"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.State != status.Scheduled || w.NextStart == nil || d.startCount() != 0 {
		t.Fatalf("applied: %s, next %v, %d starts; want scheduled, a next time, none", w.State, w.NextStart, d.startCount())
	}
	if up, _ := w.Readiness(time.Now()); !up {
		t.Error("an armed schedule is not up")
	}
	if time.Until(*w.NextStart) > time.Second+10*time.Millisecond {
		t.Errorf("next start %s is more than @every 1s away", time.Until(*w.NextStart))
	}
	// Applying it again changes nothing.
	if _, err := s.Apply(ctx, scheduledSpec("job", "@every 1s", "exit", "0"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	waitStarts(t, d, 2, 5*time.Second)
	w = waitState(t, s, "job", status.Scheduled)
	if w.LastExit == nil || !w.LastExit.Succeeded() || !strings.HasPrefix(w.Reason, "last run: ") || w.NextStart == nil {
		t.Errorf("between runs: last exit %v, reason %q, next %v", w.LastExit, w.Reason, w.NextStart)
	}

	if _, err := s.Stop(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	w = waitState(t, s, "job", status.Stopped)
	if w.NextStart != nil {
		t.Errorf("stopped, with a next start %s", w.NextStart)
	}
	n := d.startCount()
	time.Sleep(1500 * time.Millisecond)
	if d.startCount() != n {
		t.Fatalf("a stopped schedule fired: %d starts, want %d", d.startCount(), n)
	}

	if _, err := s.Start(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if d.startCount() != n+1 {
		t.Errorf("start: %d starts, want %d (one, now)", d.startCount(), n+1)
	}
	waitState(t, s, "job", status.Scheduled)
	waitStarts(t, d, n+2, 5*time.Second) // armed again
	if _, err := s.Stop(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	cancel()
	evs := collected()
	if len(evs) < 3 {
		t.Fatalf("%d schedule events, want one a run its schedule started (3 or more)", len(evs))
	}
	for _, ev := range evs {
		if !strings.Contains(ev.Message, "started by its schedule") {
			t.Errorf("schedule event %q", ev.Message)
		}
	}
}

// TestScheduleSkipsWhileRunning: a time that comes while the run before
// still runs is skipped, with an event, and no second run starts.
func TestScheduleSkipsWhileRunning(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx, cancel := context.WithCancel(context.Background())
	collected := eventsOf(s.events.Subscribe(ctx, 0), "long", status.EventSchedule)
	if _, err := s.Apply(ctx, scheduledSpec("long", "@every 1s", "run"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	w := waitState(t, s, "long", status.Running)
	if w.NextStart == nil {
		t.Error("running, without the schedule's next time")
	}
	time.Sleep(2500 * time.Millisecond)
	if n := d.startCount(); n != 1 {
		t.Fatalf("%d starts of a run that never ends, want 1", n)
	}
	if _, err := s.Stop(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	cancel()
	var skipped int
	for _, ev := range collected() {
		if strings.HasPrefix(ev.Message, "skipped the run of ") && strings.HasSuffix(ev.Message, "still running") {
			skipped++
		}
	}
	if skipped < 1 {
		t.Errorf("no skipped time reported")
	}
}

// TestScheduleMissedRunsOnce: times that passed while no daemon ran are
// one run when the next daemon starts, and the record says so: the one
// after runs nothing more.
func TestScheduleMissedRunsOnce(t *testing.T) {
	d := newFakeDriver()
	dirs := t.TempDir()
	cfg := Config{StateDir: dirs + "/state", RunDir: dirs + "/run", Drivers: []driver.Driver{d}}
	s, err := newSupervisor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Apply(ctx, scheduledSpec("nightly", "@hourly", "exit", "0"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	last := s.events.Last()
	shut(s)
	// Three hours without a daemon.
	setThrough(t, cfg.StateDir, "nightly", time.Now().Add(-3*time.Hour))

	s, err = newSupervisor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// From the first daemon's last event on: the missed time may be
	// handled, and its event published, before this subscription.
	evctx, cancel := context.WithCancel(ctx)
	collected := eventsOf(s.events.Subscribe(evctx, last), "nightly", status.EventSchedule)
	w := waitState(t, s, "nightly", status.Scheduled)
	for w.LastExit == nil {
		sleepBriefly()
		w = waitState(t, s, "nightly", status.Scheduled)
	}
	time.Sleep(100 * time.Millisecond)
	if n := d.startCount(); n != 1 {
		t.Fatalf("%d runs for three missed times, want 1", n)
	}
	if w.NextStart == nil || time.Until(*w.NextStart) <= 0 || time.Until(*w.NextStart) > time.Hour {
		t.Errorf("next start %v, want within the next hour", w.NextStart)
	}
	shut(s)
	cancel()
	evs := collected()
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "missed while no daemon ran") {
		t.Errorf("events %+v, want one saying the run was missed", evs)
	}

	s, err = newSupervisor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shut(s)
	waitState(t, s, "nightly", status.Scheduled)
	time.Sleep(100 * time.Millisecond)
	if n := d.startCount(); n != 1 {
		t.Fatalf("a daemon after the one that ran the missed time ran it again: %d runs", n)
	}
}

// TestScheduleMissedWhileItsRunGoesOn: a time missed while the run
// before still goes on, adopted by the next daemon, is skipped.
func TestScheduleMissedWhileItsRunGoesOn(t *testing.T) {
	d := newFakeDriver()
	dirs := t.TempDir()
	cfg := Config{StateDir: dirs + "/state", RunDir: dirs + "/run", Drivers: []driver.Driver{d}}
	s, err := newSupervisor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Apply(ctx, scheduledSpec("long", "@hourly", "run"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Start(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	shut(s) // the run goes on
	setThrough(t, cfg.StateDir, "long", time.Now().Add(-2*time.Hour))

	s, err = newSupervisor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shut(s)
	w := waitState(t, s, "long", status.Running)
	if w.PID != first.PID || d.startCount() != 1 {
		t.Fatalf("pid %d, %d starts; want %d adopted, no other start", w.PID, d.startCount(), first.PID)
	}
	// The next time is shown once the restored schedule has been looked
	// at, just after the run was adopted.
	for deadline := time.Now().Add(5 * time.Second); w.NextStart == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		w = waitState(t, s, "long", status.Running)
	}
	if w.NextStart == nil || time.Until(*w.NextStart) > time.Hour {
		t.Errorf("next start %v, want within the hour", w.NextStart)
	}
	if _, err := s.Stop(ctx, "long"); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleReplace: a changed spec keeps its workload scheduled and
// starts nothing; one without a schedule is a one-shot again, run.
func TestScheduleReplace(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	if _, err := s.Apply(ctx, scheduledSpec("job", "@hourly", "run"), ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx, "job"); err != nil { // running when replaced
		t.Fatal(err)
	}
	w, err := s.Apply(ctx, scheduledSpec("job", "@daily", "exit", "0"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.State != status.Scheduled || d.startCount() != 1 || w.NextStart == nil {
		t.Fatalf("replaced: %s, %d starts, next %v; want scheduled, no new start", w.State, d.startCount(), w.NextStart)
	}
	plain := scheduledSpec("job", "", "exit", "0")
	if _, err := s.Apply(ctx, plain, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	w = waitState(t, s, "job", status.Exited)
	if d.startCount() != 2 || w.NextStart != nil {
		t.Errorf("without its schedule: %d starts, next %v; want run once, no next", d.startCount(), w.NextStart)
	}
	bad := scheduledSpec("job", "@hourly", "exit", "0")
	bad.Restart.Policy = spec.RestartAlways
	if _, err := s.Apply(ctx, bad, ApplyOptions{Start: true}); err == nil || !strings.Contains(err.Error(), "schedule: ") {
		t.Errorf("a schedule with restart always: %v", err)
	}
}

func waitStarts(t *testing.T, d *fakeDriver, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for d.startCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d starts after %s, want %d", d.startCount(), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setThrough rewrites where a workload's schedule stands in its record,
// while no supervisor runs.
func setThrough(t *testing.T, stateDir, name string, at time.Time) {
	t.Helper()
	j, recs, err := journal.Open(filepath.Join(stateDir, "workloads.journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var rec records.Workload
	if err := json.Unmarshal(recs[name], &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ScheduledThrough == nil {
		t.Fatalf("record of %s: no scheduled_through; want armed", name)
	}
	rec.ScheduledThrough = &at
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Put(name, b); err != nil {
		t.Fatal(err)
	}
}
