package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/spec"
)

// TestFirstDue: a time comes once the clock reaches it; of several
// that came while nothing looked, the first is named and they are one.
func TestFirstDue(t *testing.T) {
	every5, err := spec.ParseSchedule("CRON_TZ=UTC */5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	hm := func(h, m, s int) time.Time { return time.Date(2026, 3, 10, h, m, s, 0, time.UTC) }
	through := hm(10, 0, 30)
	for _, tt := range []struct {
		now  time.Time
		due  time.Time
		runs bool
	}{
		{hm(10, 4, 59), hm(10, 5, 0), false},
		{hm(10, 5, 0), hm(10, 5, 0), true},
		{hm(10, 5, 1), hm(10, 5, 0), true},
		{hm(13, 2, 0), hm(10, 5, 0), true}, // 35 times passed: one run
	} {
		due, runs := firstDue(every5, through, tt.now)
		if !due.Equal(tt.due) || runs != tt.runs {
			t.Errorf("at %s: due %s, runs %v; want %s, %v", tt.now.Format(time.TimeOnly), due.UTC(), runs, tt.due, tt.runs)
		}
	}
	// Handled through now, the next is the first after now, not one of
	// those that passed.
	if due, _ := firstDue(every5, hm(13, 2, 0), hm(13, 2, 0)); !due.Equal(hm(13, 5, 0)) {
		t.Errorf("after folding: next %s, want 13:05", due.UTC())
	}
	// In the daemon's zone: the parser reads a schedule without a zone in
	// the zone of the time it is given, which is made local first.
	daily, err := spec.ParseSchedule("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	due, _ := firstDue(daily, hm(12, 0, 0), hm(12, 0, 0))
	if l := due.In(time.Local); l.Hour() != 3 || l.Minute() != 0 {
		t.Errorf("0 3 * * * is due at %s local time", l)
	}
}

// TestTimer: armed, the timer shows its next time and records where its
// handling stands; disarmed, neither; a changed schedule is disarmed, one
// that does not parse is none.
func TestTimer(t *testing.T) {
	var shown []*time.Time
	tm := New(func(next *time.Time) { shown = append(shown, next) })
	if has, err := tm.Follow(""); has || err != nil {
		t.Fatalf("no schedule: %v %v", has, err)
	}
	if has, err := tm.Follow("@every 1h"); !has || err != nil {
		t.Fatalf("@every 1h: %v %v", has, err)
	}
	if tm.Armed() || tm.Next() != nil || tm.Through() != nil || tm.C() != nil {
		t.Fatal("armed before ArmFrom")
	}
	from := time.Now()
	if err := tm.ArmFrom(from); err != nil {
		t.Fatal(err)
	}
	next := tm.Next()
	if !tm.Armed() || next == nil || !next.Equal(from.Add(time.Hour).Truncate(time.Second)) || tm.C() == nil {
		t.Fatalf("armed from %s: next %v", from, next)
	}
	if th := tm.Through(); th == nil || !th.Equal(from) {
		t.Errorf("through %v, want %s", th, from)
	}
	if len(shown) != 1 || shown[0] != next {
		t.Errorf("shown %v", shown)
	}
	// Not come yet: nothing to run, the timer set again.
	if _, run, err := tm.Due(from.Add(time.Minute)); run || err != nil || tm.C() == nil {
		t.Errorf("a minute in: run %v, %v", run, err)
	}
	// Three hours on: one run, of the first time; handled through now.
	now := from.Add(3 * time.Hour)
	due, run, err := tm.Due(now)
	if !run || err != nil || !due.Equal(*next) {
		t.Errorf("three hours on: due %s, run %v, %v; want %s", due, run, err, next)
	}
	if th := tm.Through(); !th.Equal(now) {
		t.Errorf("through %s, want %s", th, now)
	}

	shown = nil
	if has, _ := tm.Follow("@every 2h"); !has || tm.Armed() || tm.Next() != nil || tm.C() != nil {
		t.Error("a changed schedule is still armed")
	}
	if len(shown) != 1 || shown[0] != nil {
		t.Errorf("disarming showed %v", shown)
	}
	if has, err := tm.Follow("TZ=Nowhere/Atlantis 0 3 * * *"); has || err == nil {
		t.Errorf("a zone that does not exist: %v %v", has, err)
	}
}

// TestTimerResume: a record's instant is where handling resumes, unless it
// is after now (the clock was set back); a schedule with no later time is
// disarmed, saying so.
func TestTimerResume(t *testing.T) {
	tm := New(func(*time.Time) {})
	if _, err := tm.Follow("CRON_TZ=UTC */5 * * * *"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 13, 2, 0, 0, time.UTC)
	was := time.Date(2026, 3, 10, 10, 0, 30, 0, time.UTC)
	tm.Resume(&was, now)
	if next := tm.Next(); next == nil || !next.Equal(time.Date(2026, 3, 10, 10, 5, 0, 0, time.UTC)) {
		t.Errorf("resumed: next %v before Due, want the first missed time", next)
	}
	due, missed, err := tm.Due(now)
	if !missed || err != nil || !due.Equal(time.Date(2026, 3, 10, 10, 5, 0, 0, time.UTC)) {
		t.Errorf("resumed: due %s, missed %v, %v", due, missed, err)
	}
	later := now.Add(time.Hour)
	tm.Resume(&later, now)
	if th := tm.Through(); !th.Equal(now) {
		t.Errorf("a record after now: through %s, want now", th)
	}
	tm.Resume(nil, now)
	if _, missed, _ := tm.Due(now); missed {
		t.Error("a record without an instant: missed")
	}

	// A schedule that ends (the parser refuses one that names no time in
	// years, but a clock set far ahead passes its last).
	never := New(func(*time.Time) {})
	never.expr, never.cron = "ended", ended{}
	if err := never.ArmFrom(now); !errors.Is(err, ErrNoLaterTime) || never.Armed() {
		t.Errorf("no later time: %v, armed %v", err, never.Armed())
	}
}

// ended is a schedule with no time left.
type ended struct{}

func (ended) Next(time.Time) time.Time { return time.Time{} }
