package health

import "errors"

// Told is what the health of a run that tells it itself (a notify socket,
// a line of its output) is judged from, beside its readiness (READY=1 or
// its line), which its supervisor keeps for a later daemon.
type Told struct {
	Asleep   error // the main process is stopped, as the monitor saw
	Stopping bool  // it said STOPPING=1
	Late     error // its line did not come in time
	Watchdog *Watchdog
	LogCheck *LogCheck
	// LogFrom is where the run's output begins in its log, taken before
	// it started; nil: not known (a run of a daemon from before it was
	// kept), its output is read from where the log ends.
	LogFrom *int64
}

// Verdict judges the run: unhealthy while its main process is stopped,
// once it said it is stopping, or while its watchdog is missed; else
// healthy once ready, and unhealthy if its line is late. known is false
// while there is nothing to say yet: not ready, and not late.
func (t *Told) Verdict(ready bool) (ok bool, why error, known bool) {
	watchdogOK, watchdogWhy, armed := true, error(nil), false
	if t.Watchdog != nil {
		watchdogOK, watchdogWhy, armed = t.Watchdog.Verdict()
	}
	switch {
	case t.Asleep != nil:
		return false, t.Asleep, true
	case t.Stopping:
		return false, errors.New("the program says it is stopping"), true
	case armed && !watchdogOK:
		return false, watchdogWhy, true
	case ready:
		return true, nil, true
	case t.Late != nil:
		return false, t.Late, true
	}
	return false, nil, false
}

// Stop stops the run's watchdog and log check, and forgets what it told.
func (t *Told) Stop() {
	if t.Watchdog != nil {
		t.Watchdog.Stop()
	}
	if t.LogCheck != nil {
		t.LogCheck.Stop()
	}
	*t = Told{}
}
