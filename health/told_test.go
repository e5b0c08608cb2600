package health

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestToldVerdict: a stopped process, a STOPPING=1, a missed watchdog
// each outweigh readiness; readiness outweighs a late line; nothing yet
// is no verdict.
func TestToldVerdict(t *testing.T) {
	asleep, late := errors.New("asleep"), errors.New("late")
	missed := func() *Watchdog {
		d := NewWatchdog(time.Millisecond, func() {})
		d.Arm()
		t.Cleanup(d.Stop)
		deadline := time.Now().Add(5 * time.Second)
		for ok, _, _ := d.Verdict(); ok; ok, _, _ = d.Verdict() {
			if time.Now().After(deadline) {
				t.Fatal("the watchdog never missed")
			}
			time.Sleep(time.Millisecond)
		}
		return d
	}
	kept := func() *Watchdog {
		d := NewWatchdog(time.Hour, func() {})
		d.Arm()
		t.Cleanup(d.Stop)
		return d
	}
	unarmed := func() *Watchdog {
		d := NewWatchdog(time.Millisecond, func() {})
		t.Cleanup(d.Stop)
		return d
	}
	for _, tc := range []struct {
		name    string
		told    Told
		ready   bool
		ok      bool
		why     error // nil: any
		whyText string
		known   bool
	}{
		{name: "nothing yet"},
		{name: "ready", ready: true, ok: true, known: true},
		{name: "late", told: Told{Late: late}, why: late, known: true},
		{name: "ready though late", told: Told{Late: late}, ready: true, ok: true, known: true},
		{name: "asleep", told: Told{Asleep: asleep}, ready: true, why: asleep, known: true},
		{name: "asleep before ready", told: Told{Asleep: asleep}, why: asleep, known: true},
		{name: "stopping", told: Told{Stopping: true}, ready: true, whyText: "the program says it is stopping", known: true},
		{name: "asleep and stopping", told: Told{Asleep: asleep, Stopping: true}, why: asleep, known: true},
		{name: "watchdog missed", told: Told{Watchdog: missed()}, ready: true, whyText: "no keepalive", known: true},
		{name: "watchdog kept", told: Told{Watchdog: kept()}, ready: true, ok: true, known: true},
		{name: "watchdog not armed", told: Told{Watchdog: unarmed()}},
		{name: "stopping before watchdog", told: Told{Stopping: true, Watchdog: missed()}, whyText: "stopping", known: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why, known := tc.told.Verdict(tc.ready)
			if ok != tc.ok || known != tc.known {
				t.Fatalf("Verdict = %v, %v, %v; want ok %v known %v", ok, why, known, tc.ok, tc.known)
			}
			switch {
			case tc.why != nil && !errors.Is(why, tc.why):
				t.Fatalf("why = %v, want %v", why, tc.why)
			case tc.whyText != "" && (why == nil || !strings.Contains(why.Error(), tc.whyText)):
				t.Fatalf("why = %v, want it to say %q", why, tc.whyText)
			case tc.ok && why != nil:
				t.Fatalf("healthy with why %v", why)
			}
		})
	}
}

// TestToldStop stops what a run's told health holds and forgets it.
func TestToldStop(t *testing.T) {
	d := NewWatchdog(time.Millisecond, func() { t.Error("a stopped watchdog spoke") })
	from := int64(7)
	told := Told{Stopping: true, Watchdog: d, LogFrom: &from}
	told.Stop()
	d.Arm()
	time.Sleep(10 * time.Millisecond)
	if told.Stopping || told.Watchdog != nil || told.LogFrom != nil {
		t.Fatalf("after Stop: %+v", told)
	}
}
