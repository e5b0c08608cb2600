package health

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchdogStates runs the watchdog's state machine on given times:
// t is a moment, in seconds, of a watchdog of 10 s.
func TestWatchdogStates(t *testing.T) {
	type step struct {
		at  float64 // seconds from the start
		msg *Message
		// want after the step: armed, and "" for healthy or a word of
		// why not.
		armed bool
		why   string
	}
	ready, keep, reload := &Message{Ready: true}, &Message{Watchdog: true}, &Message{Reloading: true}
	extend := func(s float64) *Message { return &Message{Extend: time.Duration(s * float64(time.Second))} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"not armed before READY=1", []step{
			{at: 0, msg: keep}, {at: 100, armed: false}, {at: 100, msg: &Message{Trigger: true}, armed: false},
		}},
		{"keepalives keep it healthy", []step{
			{at: 0, msg: ready, armed: true}, {at: 9, msg: keep, armed: true}, {at: 18, msg: keep, armed: true},
			{at: 27.9, armed: true}, {at: 28, armed: true, why: "WATCHDOG=1"},
		}},
		{"a keepalive after a miss makes it healthy again", []step{
			{at: 0, msg: ready, armed: true}, {at: 10, armed: true, why: "within its watchdog period of 10s"},
			{at: 11, msg: keep, armed: true}, {at: 20.9, armed: true},
		}},
		{"EXTEND_TIMEOUT_USEC moves the deadline once", []step{
			{at: 0, msg: ready, armed: true}, {at: 5, msg: extend(30), armed: true},
			{at: 34, armed: true}, {at: 35, armed: true, why: "WATCHDOG=1"},
		}},
		{"the next keepalive brings the deadline back to a period", []step{
			{at: 0, msg: ready, armed: true}, {at: 5, msg: extend(30), armed: true},
			{at: 6, msg: keep, armed: true}, {at: 16, armed: true, why: "WATCHDOG=1"},
		}},
		{"an extension shorter than what is left changes nothing", []step{
			{at: 0, msg: ready, armed: true}, {at: 1, msg: extend(2), armed: true},
			{at: 9.9, armed: true}, {at: 10, armed: true, why: "WATCHDOG=1"},
		}},
		{"an extension after a miss comes too late", []step{
			{at: 0, msg: ready, armed: true}, {at: 10, armed: true, why: "WATCHDOG=1"},
			{at: 11, msg: extend(60), armed: true, why: "WATCHDOG=1"},
		}},
		{"a reload extended is not unhealthy until READY=1", []step{
			{at: 0, msg: ready, armed: true}, {at: 5, msg: reload, armed: true}, {at: 6, msg: extend(60), armed: true},
			{at: 60, armed: true}, {at: 61, msg: ready, armed: true}, {at: 70.9, armed: true},
			{at: 71, armed: true, why: "WATCHDOG=1"},
		}},
		{"a reload that outlasts its extension", []step{
			{at: 0, msg: ready, armed: true}, {at: 5, msg: reload, armed: true}, {at: 6, msg: extend(20), armed: true},
			{at: 25.9, armed: true}, {at: 26, armed: true, why: "reload did not end"},
		}},
		{"a reload not extended has a period", []step{
			{at: 0, msg: ready, armed: true}, {at: 9, msg: reload, armed: true},
			{at: 18.9, armed: true}, {at: 19, armed: true, why: "reload did not end"},
		}},
		{"WATCHDOG=trigger is a miss at once", []step{
			{at: 0, msg: ready, armed: true}, {at: 1, msg: &Message{Trigger: true}, armed: true, why: "WATCHDOG=trigger"},
			{at: 2, msg: keep, armed: true},
		}},
		{"a keepalive with its trigger still fails", []step{
			{at: 0, msg: ready, armed: true}, {at: 1, msg: &Message{Watchdog: true, Trigger: true}, armed: true, why: "trigger"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zero := time.Now()
			s := watchdogState{period: 10 * time.Second}
			for i, st := range tt.steps {
				now := zero.Add(time.Duration(st.at * float64(time.Second)))
				if st.msg != nil {
					s.hear(*st.msg, now)
				}
				s.expire(now)
				why := ""
				if s.missed != nil {
					why = s.missed.Error()
				}
				if s.armed != st.armed || (st.why == "") != (why == "") || !strings.Contains(why, st.why) {
					t.Fatalf("step %d (at %gs): armed %v, unhealthy for %q; want armed %v, unhealthy for %q", i, st.at, s.armed, why, st.armed, st.why)
				}
			}
		})
	}
}

// TestWatchdogTimer: with a real clock and a short period, a program
// that stops its keepalives is unhealthy a period after the last, and
// healthy again at the next; the change is told each time.
func TestWatchdogTimer(t *testing.T) {
	// Long enough that a loaded machine still sends each keepalive in time.
	const period = 300 * time.Millisecond
	var changes atomic.Int64
	d := NewWatchdog(period, func() { changes.Add(1) })
	defer d.Stop()
	verdict := func() (bool, bool) {
		ok, _, armed := d.Verdict()
		return ok, armed
	}
	d.Hear(Message{Watchdog: true})
	if _, armed := verdict(); armed || changes.Load() != 0 {
		t.Fatal("armed by a keepalive before READY=1")
	}
	d.Hear(Message{Ready: true})
	began := time.Now()
	for time.Since(began) < 4*period {
		time.Sleep(period / 3)
		d.Hear(Message{Watchdog: true})
		if ok, _ := verdict(); !ok {
			t.Fatal("unhealthy while it sends its keepalives")
		}
	}
	last := time.Now()
	for {
		if ok, _ := verdict(); !ok {
			break
		}
		if time.Since(last) > 5*time.Second {
			t.Fatal("still healthy long after its keepalives stopped")
		}
		time.Sleep(time.Millisecond)
	}
	if waited := time.Since(last); waited < period {
		t.Errorf("unhealthy %v after the last keepalive; want a period, %v", waited, period)
	}
	if _, err, _ := d.Verdict(); err == nil || !strings.Contains(err.Error(), "300ms") {
		t.Errorf("why: %v", err)
	}
	d.Hear(Message{Watchdog: true})
	if ok, _ := verdict(); !ok {
		t.Error("not healthy again after a keepalive")
	}
	if n := changes.Load(); n != 3 {
		t.Errorf("%d changes told; want 3: armed, missed, kept", n)
	}
	d.Stop()
	// A period may pass on a loaded machine between the count above and
	// Stop: what counts is that nothing is told once Stop returned.
	stopped := changes.Load()
	time.Sleep(2 * period)
	if n := changes.Load(); n != stopped {
		t.Errorf("%d changes told after Stop", n-stopped)
	}
}
