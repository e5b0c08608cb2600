// Package schedule keeps the times of a scheduled workload
// (spec.Schedule): when its next run is due, what was handled, and, for a
// daemon that was down, which of the times that passed are one missed
// run. It decides no run: its owner asks it whether a time has come and
// starts the run, or skips it while the one before goes on.
//
// A Timer is not safe for concurrent use, but for Next: its owner (a
// workload's loop) calls the rest.
package schedule

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/flyd-dev/flyd/spec"
)

// maxSleep bounds one wait for a schedule's next time: a timer counts the
// monotonic clock and a schedule names wall-clock times, so a clock that
// is set (NTP at boot, a resumed machine) is noticed within it.
const maxSleep = time.Minute

// ErrNoLaterTime says the schedule names no time after the last one
// handled: it is disarmed.
var ErrNoLaterTime = errors.New("the schedule names no later time; disarmed")

// Timer is a workload's schedule at work. Armed, it wakes its owner (C)
// at each of the schedule's times, and keeps the instant up to which they
// were handled (Through), which the owner records so that a later daemon
// handles those that pass while none runs.
type Timer struct {
	expr string        // the schedule, as parsed into cron
	cron cron.Schedule // nil: none
	// armed says the schedule's times are the owner's to run.
	armed bool
	// through is the instant up to which every time of the schedule has
	// been handled: run, skipped, or folded into one missed run.
	through time.Time
	timer   *time.Timer
	// next is the time the timer waits for, while armed: stored by the
	// workload's loop, which owns every other field, and loaded by any
	// goroutine (Next).
	next atomic.Pointer[time.Time]
	// shown is told of every change of next; nil: disarmed.
	shown func(next *time.Time)
}

// New is a timer with no schedule yet; shown is told its next time
// whenever it changes (nil once disarmed).
func New(shown func(next *time.Time)) *Timer { return &Timer{shown: shown} }

// Follow makes expr the timer's schedule and says whether it has one. A
// schedule that changed is parsed anew, disarmed; one that does not parse
// (validated at apply: a zone gone from the host since) is none, with the
// parser's error, and is tried again at the next call.
func (t *Timer) Follow(expr string) (bool, error) {
	var err error
	if t.expr != expr || (t.cron == nil && expr != "") {
		t.Disarm()
		t.expr, t.cron = expr, nil
		if expr != "" {
			t.cron, err = spec.ParseSchedule(expr)
		}
	}
	return t.cron != nil, err
}

// Armed says whether the schedule's times are run.
func (t *Timer) Armed() bool { return t.armed }

// C is what the owner waits on for the schedule's time; nil while none
// is waited for.
func (t *Timer) C() <-chan time.Time {
	if t.timer == nil {
		return nil
	}
	return t.timer.C
}

// Next is the schedule's next time while armed, else nil. Any goroutine
// may call it.
func (t *Timer) Next() *time.Time { return t.next.Load() }

// Through is what a record keeps of the schedule: where its handling
// stands while armed, nil otherwise.
func (t *Timer) Through() *time.Time {
	if !t.armed {
		return nil
	}
	through := t.through
	return &through
}

// Disarm stops the schedule: no time of it is due.
func (t *Timer) Disarm() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.armed = false
	if t.next.Swap(nil) != nil {
		t.shown(nil)
	}
}

// ArmFrom arms the schedule from from: its times after it are due, none
// before. It fails with ErrNoLaterTime when there is none.
func (t *Timer) ArmFrom(from time.Time) error {
	t.armed, t.through = true, from
	return t.wake(time.Now())
}

// Resume arms the schedule as a record left it, without waiting for its
// times yet (Due does): handled through through, or from now when the
// record says nothing of it or a time after now (the clock was set back
// since). Its next time is known at once (a missed one is due now), so
// that the workload is never shown armed without it.
func (t *Timer) Resume(through *time.Time, now time.Time) {
	t.armed, t.through = true, now
	if through != nil && !through.After(now) {
		t.through = *through
	}
	if t.cron == nil {
		return
	}
	if next := t.cron.Next(t.through.Local()); !next.IsZero() {
		t.next.Store(&next)
	}
}

// Due looks at the schedule, when its timer fired or a resumed one is
// first looked at: run says a time of it came by now, due the first of
// them; however many came (a daemon that was down, a loop held up), they
// are one run, and handled. The timer is set for the next time after
// them; err is ErrNoLaterTime when there is none, and the schedule is
// disarmed, whether or not a time came.
func (t *Timer) Due(now time.Time) (due time.Time, run bool, err error) {
	t.timer = nil
	if !t.armed || t.cron == nil {
		return time.Time{}, false, nil
	}
	due, run = firstDue(t.cron, t.through, now)
	if run {
		t.through = now
	}
	return due, run, t.wake(now)
}

// firstDue says whether a time of sched after through has come by now,
// and which is the first of them.
func firstDue(sched cron.Schedule, through, now time.Time) (due time.Time, runs bool) {
	due = sched.Next(through.Local())
	return due, !due.IsZero() && !due.After(now)
}

// wake sets the timer for the schedule's first time after through.
func (t *Timer) wake(now time.Time) error {
	if t.timer != nil {
		t.timer.Stop()
	}
	next := t.cron.Next(t.through.Local())
	if next.IsZero() {
		t.Disarm()
		return ErrNoLaterTime
	}
	t.timer = time.NewTimer(min(max(next.Sub(now), 0), maxSleep))
	t.next.Store(&next)
	t.shown(&next)
	return nil
}
