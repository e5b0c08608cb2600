package supervisor

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A scheduled workload (spec.Schedule) is a one-shot its schedule starts,
// as a systemd timer starts its service and Nomad launches a periodic
// job. Applying it arms the schedule and starts nothing; `start` arms it
// and runs it once now; `stop` disarms it. At each time of the schedule
// a run starts, unless the one before is still going (running, restarting
// by its policy, or waiting for what it comes after): that time is
// skipped, with an event. Between runs the workload is `scheduled`, its
// next time in NextStart.
//
// While armed, the workload's record keeps the instant up to which the
// schedule's times were handled (specRecord.ScheduledThrough): a daemon
// that starts after a time passed while none ran runs it once, however
// many passed.

// maxScheduleSleep bounds one wait for a schedule's next time: a timer
// counts the monotonic clock and a schedule names wall-clock times, so a
// clock that is set (NTP at boot, a resumed machine) is noticed within it.
const maxScheduleSleep = time.Minute

// schedule is a workload's spec.Schedule at work, kept by its loop; only
// next is read elsewhere.
type schedule struct {
	expr string        // the spec's schedule, as parsed into cron
	cron cron.Schedule // nil: the workload has none
	// armed says the schedule starts runs at its times.
	armed bool
	// through is the instant up to which every time of the schedule has
	// been handled: run, skipped, or folded into one missed run.
	through time.Time
	timer   *time.Timer
	// next is the time the timer waits for, while armed.
	next atomic.Pointer[time.Time]
}

// wakeC is what the loop waits on for the schedule's timer.
func (sc *schedule) wakeC() <-chan time.Time {
	if sc.timer == nil {
		return nil
	}
	return sc.timer.C
}

// shown is the schedule's next time, for NextStart; nil when disarmed.
func (sc *schedule) shown() *time.Time { return sc.next.Load() }

// record is what the workload's record keeps of the schedule: where its
// handling stands while armed, nil otherwise.
func (sc *schedule) record() *time.Time {
	if !sc.armed {
		return nil
	}
	t := sc.through
	return &t
}

// scheduled says whether the workload's spec has a schedule, making
// w.sched the spec's: a changed schedule is parsed anew, disarmed.
func (w *workload) scheduled() bool {
	if w.sched.expr != w.spec.Schedule || (w.sched.cron == nil && w.spec.Schedule != "") {
		w.disarm()
		w.sched.expr, w.sched.cron = w.spec.Schedule, nil
		if w.spec.Schedule != "" {
			c, err := spec.ParseSchedule(w.spec.Schedule)
			if err != nil { // validated at apply: a zone gone from the host since
				w.log.Error("the schedule does not parse", zap.Error(err))
				w.publish(status.Event{Type: status.EventError, Message: "schedule: " + err.Error()})
			}
			w.sched.cron = c
		}
	}
	return w.sched.cron != nil
}

// disarm stops the schedule: no time of it starts a run.
func (w *workload) disarm() {
	if w.sched.timer != nil {
		w.sched.timer.Stop()
		w.sched.timer = nil
	}
	w.sched.armed = false
	if w.sched.next.Swap(nil) != nil {
		w.showNext(nil)
	}
}

// armFrom arms the schedule: its times after from start runs, none before.
func (w *workload) armFrom(from time.Time) {
	w.sched.armed, w.sched.through = true, from
	w.wake(time.Now())
}

// wake sets the timer for the schedule's first time after through.
func (w *workload) wake(now time.Time) {
	if w.sched.timer != nil {
		w.sched.timer.Stop()
	}
	next := w.sched.cron.Next(w.sched.through.Local())
	if next.IsZero() {
		w.disarm()
		w.publish(status.Event{Type: status.EventSchedule, Message: "the schedule names no later time; disarmed"})
		return
	}
	w.sched.timer = time.NewTimer(min(max(next.Sub(now), 0), maxScheduleSleep))
	w.sched.next.Store(&next)
	w.showNext(&next)
}

// showNext shows the schedule's next time as NextStart, but for a
// workload in backoff, whose NextStart is its restart's.
func (w *workload) showNext(next *time.Time) {
	w.update(func(v *status.Workload) {
		if v.State != status.Backoff {
			v.NextStart = next
		}
	})
}

// onSchedule is the schedule's timer: its time has come, or the timer's
// longest wait has passed.
func (w *workload) onSchedule() {
	w.sched.timer = nil
	if !w.sched.armed || !w.scheduled() {
		return
	}
	now := time.Now()
	due, runs := scheduleDue(w.sched.cron, w.sched.through, now)
	if !runs {
		w.wake(now)
		return
	}
	w.sched.through = now
	w.wake(now)
	w.fire(due, false)
}

// scheduleDue says whether a time of sched after through has come by now,
// and which is the first of them: however many have come (a daemon that
// was down, a loop held up), they are one run.
func scheduleDue(sched cron.Schedule, through, now time.Time) (due time.Time, runs bool) {
	due = sched.Next(through.Local())
	return due, !due.IsZero() && !due.After(now)
}

// fire starts the run for the schedule's time due, or skips that time
// while the run before is still going. missed says no daemon ran at due.
func (w *workload) fire(due time.Time, missed bool) {
	at := due.Local().Format("2006-01-02 15:04:05 MST")
	if w.desired || w.proc != nil || w.unadopted != nil {
		v := w.snapshot(false)
		going := string(v.State)
		switch v.State {
		case status.Backoff:
			going = "to be restarted by its policy"
		case status.Pending:
			going = "pending (" + v.Reason + ")"
		case status.Unknown:
			going = "unknown (an earlier daemon's, not adopted yet)"
		}
		w.publish(status.Event{Type: status.EventSchedule, State: v.State,
			Message: fmt.Sprintf("skipped the run of %s: the run before is still %s", at, going)})
		if w.desired {
			_ = w.persist("", "") // where the schedule stands
		}
		return
	}
	w.desired = true
	if err := w.persist("", ""); err != nil {
		w.desired = false
		w.publish(status.Event{Type: status.EventError, Message: fmt.Sprintf("the run of %s is not started: %v", at, err)})
		return
	}
	msg := "run of " + at + " started by its schedule"
	if missed {
		msg = "run of " + at + ", missed while no daemon ran, started now"
	}
	w.log.Info("scheduled run", zap.Time("due", due), zap.Bool("missed", missed))
	w.publish(status.Event{Type: status.EventSchedule, Message: msg})
	w.failures.reset()
	w.start()
}

// armAtApply is an apply's start of a scheduled workload: its schedule
// armed (from now, unless it was), and no run started; it is at rest,
// scheduled, unless a run it had goes on.
func (w *workload) armAtApply() error {
	if !w.sched.armed {
		w.armFrom(time.Now())
	}
	if w.proc != nil || w.unadopted != nil {
		return w.persist("", "")
	}
	w.cancelTimer()
	w.desired = false
	if err := w.persist(status.Scheduled, ""); err != nil {
		w.disarm()
		w.setState(status.Stopped, "its schedule could not be recorded")
		return err
	}
	w.setState(status.Scheduled, "")
	return nil
}

// armIfDisarmed is the apply of an unchanged scheduled workload: armed
// if it was not, else left as it is, a run in progress included.
func (w *workload) armIfDisarmed() error {
	if w.sched.armed {
		return nil
	}
	return w.armAtApply()
}

// armAtStart arms a scheduled workload that a user starts, from now; the
// start runs it once.
func (w *workload) armAtStart() {
	if w.scheduled() && !w.sched.armed {
		w.armFrom(time.Now())
	}
}

// applyStart is an apply's start: a scheduled workload is armed, any
// other started.
func (w *workload) applyStart() error {
	if w.scheduled() {
		return w.armAtApply()
	}
	return w.userStart()
}

// restScheduled is how a workload comes to rest with its schedule: a stop
// disarms it; an armed one whose run ended, well or not, is scheduled.
func (w *workload) restScheduled(st status.State, reason string) (status.State, string) {
	switch {
	case st == status.Stopped:
		w.disarm()
	case w.sched.armed && st == status.Exited:
		return status.Scheduled, "last run: " + reason
	case w.sched.armed && st == status.Failed:
		return status.Scheduled, "last run failed: " + reason
	}
	return st, reason
}

// restoreScheduled is restore for a workload that may have a schedule:
// armed as its record says before its run is looked at, so that a run
// that ended meanwhile leaves it scheduled; then a time that passed while
// no daemon ran is run, once.
func (w *workload) restoreScheduled(rec specRecord, run *recovered) {
	now := time.Now()
	armed := w.scheduled() && w.s.drivers[rec.Spec.Kind] != nil && (rec.ScheduledThrough != nil || rec.Running)
	if armed {
		w.sched.armed, w.sched.through = true, now
		if t := rec.ScheduledThrough; t != nil && !t.After(now) {
			w.sched.through = *t // after now: the clock was set back since
		}
	}
	w.restore(rec, run)
	if !w.sched.armed {
		return
	}
	due, missed := scheduleDue(w.sched.cron, w.sched.through, now)
	if missed {
		w.sched.through = now
	}
	w.wake(now)
	if missed {
		w.fire(due, true)
	}
}
