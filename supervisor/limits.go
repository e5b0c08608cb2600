package supervisor

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/status"
)

// limitCheck is how often the limit watcher looks at every workload.
const limitCheck = time.Second

// everyWorkload calls check for every workload, every so often, until the
// supervisor closes: a loop of the supervisor's own (s.wg counts it).
func (s *Supervisor) everyWorkload(every time.Duration, check func(*workload, time.Time)) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	// One slice for every pass: a fresh one each second was the idle
	// daemon's garbage, and each collection scans every workload's stacks.
	var ws []*workload
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			ws = ws[:0]
			for _, w := range s.workloads {
				ws = append(ws, w)
			}
			s.mu.Unlock()
			for _, w := range ws {
				check(w, now)
			}
			clear(ws) // no pointer kept to a workload removed meanwhile
		}
	}
}

// checkLimits looks, every second (everyWorkload), at the OOM kill and
// pids refusal counters of a workload with a memory or pids limit, and makes every new
// hit an event and a count in its state: the kill of a process that is not
// the main one leaves the workload running, and would otherwise go unseen.
func (s *Supervisor) checkLimits(w *workload, now time.Time) {
	// Read without copying the view: most workloads have no limit, and
	// this runs for each of them every second.
	v := w.view.Load()
	sp, state := v.Spec, v.State
	if s.cfg.Cgroups == nil || sp == nil || sp.Resources == nil || (sp.Resources.MemoryMax == 0 && sp.Resources.PidsMax == 0) {
		return
	}
	cg, err := s.cfg.Cgroups.Open(w.name)
	if err != nil {
		return // no run yet
	}
	newOOM, newPids, err := w.limitHits.Look(cg)
	if err != nil || newOOM == 0 && newPids == 0 {
		return
	}
	w.update(func(v *status.Workload) {
		// A new count: the one shown may be in a reader's hands.
		var h status.LimitHits
		if v.LimitHits != nil {
			h = *v.LimitHits
		}
		at := now
		if newOOM > 0 {
			h.OOMKills += newOOM
			h.LastOOMKill = &at
		}
		if newPids > 0 {
			h.PidsRefusals += newPids
			h.LastRefusal = &at
		}
		v.LimitHits = &h
	})
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
