package supervisor

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/usage"
)

// limitHit makes every new hit of a workload's memory or pids limit
// (usage.Limits) an event and a count in its state: the kill of a
// process that is not the main one leaves the workload running, and
// would otherwise go unseen.
func (s *Supervisor) limitHit(name string, newOOM, newPids int, now time.Time) {
	w, err := s.lookup(name)
	if err != nil {
		return
	}
	w.update(func(v *status.Workload) { v.LimitHits = usage.Counted(v.LimitHits, newOOM, newPids, now) })
	state := w.view.Load().State
	running := state == status.Running
	if newOOM > 0 {
		msg := count(newOOM, "process", "processes") + " killed by the memory limit (resources.memory_max)"
		if running {
			msg += "; the main process runs on"
		}
		w.log.Warn("OOM kill", zap.Int("killed", newOOM))
		w.publish(status.Event{Type: status.EventLimit, State: state, Message: msg})
	}
	if newPids > 0 {
		w.log.Warn("forks refused by the pids limit", zap.Int("refused", newPids))
		w.publish(status.Event{Type: status.EventLimit, State: state,
			Message: count(newPids, "fork", "forks") + " refused by the pids limit (resources.pids_max)"})
	}
}

// count is n of a thing, in words: "1 fork", "3 forks".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
