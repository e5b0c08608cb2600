package health

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Watchdog judges a program by the keepalives it sends on its notify
// socket, as systemd's WatchdogSec= does: once the program has said
// READY=1, a WATCHDOG=1 is due within every period, and a period without
// one makes it unhealthy until the next. The program is told the period
// (WATCHDOG_USEC) and sends about twice a period.
//
// As to systemd: EXTEND_TIMEOUT_USEC=N moves the deadline to N µs from
// now, if that is later (once: the next keepalive brings it back to a
// period); RELOADING=1 starts a reload, which the program ends with
// READY=1 and during which it is not unhealthy until that deadline has
// passed (a long reload extends it); WATCHDOG=trigger is a miss at once.
type Watchdog struct {
	onChange func()

	// mu guards st, timer and stopped; onChange runs without it.
	mu      sync.Mutex
	st      watchdogState
	timer   *time.Timer
	stopped bool
}

// NewWatchdog is a watchdog of period, not armed until the program says
// READY=1 (Hear) or Arm is called. onChange is told, with no verdict,
// that the verdict changed: read it with Verdict. It must not block and
// may be called from several goroutines at once.
func NewWatchdog(period time.Duration, onChange func()) *Watchdog {
	d := &Watchdog{onChange: onChange, st: watchdogState{period: period}}
	d.timer = time.AfterFunc(time.Hour, d.expire)
	d.timer.Stop()
	return d
}

// Hear takes a message the program sent, each one, repeats included:
// a keepalive repeats the last message by nature.
func (d *Watchdog) Hear(m Message) {
	d.change(func(now time.Time) { d.st.hear(m, now) })
}

// Arm starts the watchdog as if the program had just said READY=1: a run
// adopted from an earlier daemon, which it told so.
func (d *Watchdog) Arm() {
	d.change(func(now time.Time) { d.st.hear(Message{Ready: true}, now) })
}

// Verdict is the watchdog's judgement: armed false while the program has
// not said READY=1 (nothing to judge yet), else healthy or why not.
func (d *Watchdog) Verdict() (healthy bool, err error, armed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st.missed == nil, d.st.missed, d.st.armed
}

// Stop ends the watchdog: no change is judged after it returns, though an
// onChange call of a change judged just before may still reach its callee
// (it is made outside the lock), which therefore asks, on its own loop,
// whether the watchdog is still the current run's (health.Hook does).
func (d *Watchdog) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.timer.Stop()
}

func (d *Watchdog) change(f func(now time.Time)) {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	before := d.st.verdict()
	now := time.Now()
	f(now)
	d.st.expire(now)
	changed := d.st.verdict() != before
	d.schedule(now)
	d.mu.Unlock()
	if changed {
		d.onChange()
	}
}

func (d *Watchdog) expire() {
	d.change(func(time.Time) {})
}

// schedule sets the timer for the deadline, if one is pending.
func (d *Watchdog) schedule(now time.Time) {
	if d.st.armed && d.st.missed == nil {
		d.timer.Reset(d.st.due.Sub(now))
	} else {
		d.timer.Stop()
	}
}

// watchdogState is the watchdog's state machine, on times it is given.
type watchdogState struct {
	period    time.Duration
	armed     bool      // the program said READY=1
	reloading bool      // between RELOADING=1 and READY=1
	due       time.Time // the deadline, once armed
	missed    error     // why it is unhealthy; nil: it is not
}

// verdict is what onChange is about: armed, and healthy or not.
func (s *watchdogState) verdict() [2]bool { return [2]bool{s.armed, s.missed == nil} }

// hear applies one message at now.
func (s *watchdogState) hear(m Message, now time.Time) {
	switch {
	case m.Ready:
		s.armed, s.reloading = true, false
		s.keep(now)
	case !s.armed:
		return // start-up: a watchdog is armed once it is over
	case m.Reloading:
		s.reloading = true
		s.keep(now)
	case m.Watchdog:
		s.keep(now)
	}
	if m.Extend > 0 && s.missed == nil {
		if later := now.Add(m.Extend); later.After(s.due) {
			s.due = later
		}
	}
	if m.Trigger {
		s.missed = errTriggered
	}
}

var errTriggered = errors.New("the program triggered its watchdog (WATCHDOG=trigger)")

// keep is a sign of life at now: the next is due a period later.
func (s *watchdogState) keep(now time.Time) {
	s.due, s.missed = now.Add(s.period), nil
}

// expire judges the deadline at now.
func (s *watchdogState) expire(now time.Time) {
	if !s.armed || s.missed != nil || now.Before(s.due) {
		return
	}
	if s.reloading {
		s.missed = errors.New("its reload did not end (READY=1) in time, nor was it extended (EXTEND_TIMEOUT_USEC)")
		return
	}
	s.missed = fmt.Errorf("no keepalive (WATCHDOG=1) within its watchdog period of %s", s.period)
}
