package supervisor

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/records"
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
// The times are the schedule package's (w.sched); what a time does to the
// workload is here. While armed, the workload's record keeps the instant
// up to which the schedule's times were handled
// (records.Workload.ScheduledThrough): a daemon that starts after a time passed
// while none ran runs it once, however many passed.

// scheduled says whether the workload's spec has a schedule, making
// w.sched the spec's: a changed schedule is parsed anew, disarmed.
func (w *workload) scheduled() bool {
	has, err := w.sched.Follow(w.spec.Schedule)
	if err != nil {
		w.log.Error("the schedule does not parse", zap.Error(err))
		w.publish(status.Event{Type: status.EventError, Message: "schedule: " + err.Error()})
	}
	return has
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

// sayIfDisarmed says what became of the schedule when its timer was set,
// if it named no later time and was disarmed.
func (w *workload) sayIfDisarmed(err error) {
	if err != nil {
		w.publish(status.Event{Type: status.EventSchedule, Message: err.Error()})
	}
}

// onSchedule is the schedule's timer: its time has come, or the timer's
// longest wait has passed.
func (w *workload) onSchedule() {
	if !w.scheduled() {
		return
	}
	due, runs, err := w.sched.Due(time.Now())
	w.sayIfDisarmed(err)
	if runs {
		w.fire(due, false)
	}
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
	w.failures.Reset()
	w.start()
}

// armAtApply is an apply's start of a scheduled workload: its schedule
// armed (from now, unless it was), and no run started; it is at rest,
// scheduled, unless a run it had goes on.
func (w *workload) armAtApply() error {
	if !w.sched.Armed() {
		w.sayIfDisarmed(w.sched.ArmFrom(time.Now()))
	}
	if w.proc != nil || w.unadopted != nil {
		return w.persist("", "")
	}
	w.cancelTimer()
	w.desired = false
	if err := w.persist(status.Scheduled, ""); err != nil {
		w.sched.Disarm()
		w.setState(status.Stopped, "its schedule could not be recorded")
		return err
	}
	w.setState(status.Scheduled, "")
	return nil
}

// armIfDisarmed is the apply of an unchanged scheduled workload: armed
// if it was not, else left as it is, a run in progress included.
func (w *workload) armIfDisarmed() error {
	if w.sched.Armed() {
		return nil
	}
	return w.armAtApply()
}

// armAtStart arms a scheduled workload that a user starts, from now; the
// start runs it once.
func (w *workload) armAtStart() {
	if w.scheduled() && !w.sched.Armed() {
		w.sayIfDisarmed(w.sched.ArmFrom(time.Now()))
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
		w.sched.Disarm()
	case w.sched.Armed() && st == status.Exited:
		return status.Scheduled, "last run: " + reason
	case w.sched.Armed() && st == status.Failed:
		return status.Scheduled, "last run failed: " + reason
	}
	return st, reason
}

// restoreScheduled is restore for a workload that may have a schedule:
// armed as its record says before its run is looked at, so that a run
// that ended meanwhile leaves it scheduled; then a time that passed while
// no daemon ran is run, once.
func (w *workload) restoreScheduled(rec records.Workload, run *records.Recovered) {
	now := time.Now()
	if w.scheduled() && w.s.drivers[rec.Spec.Kind] != nil && (rec.ScheduledThrough != nil || rec.Running) {
		w.sched.Resume(rec.ScheduledThrough, now)
	}
	w.restore(rec, run)
	if !w.sched.Armed() {
		return
	}
	due, missed, err := w.sched.Due(now)
	w.sayIfDisarmed(err)
	if missed {
		w.fire(due, true)
	}
}
