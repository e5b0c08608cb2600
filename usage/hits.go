package usage

import (
	"sync"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/status"
)

// Hits is where the counting of one workload's limit hits stands: what
// its cgroup's OOM kill and pids refusal counters said at the last look.
// Its run's launch and the daemon's every-second look share it.
type Hits struct {
	// mu guards known, oom and pids; a baseline reads the counters while
	// holding it, a look before it takes it.
	mu        sync.Mutex
	known     bool
	oom, pids int
}

// Baseline takes the counters of a cgroup not looked at yet as the point
// from which hits are news: hits an earlier daemon saw are not this
// one's. A run's launch takes it before the run begins, so that a hit in
// the run's first moments is news.
func (h *Hits) Baseline(cg *sandbox.Cgroup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known || cg == nil {
		return
	}
	oom, oerr := cg.OOMKills()
	pids, perr := cg.PidsRefusals()
	if oerr == nil && perr == nil {
		h.known, h.oom, h.pids = true, oom, pids
	}
}

// Look reads cg's counters and returns how many hits they gained since
// the last look; the first look at a cgroup adopted from an earlier
// daemon only takes a baseline.
func (h *Hits) Look(cg *sandbox.Cgroup) (newOOM, newPids int, err error) {
	oom, err := cg.OOMKills()
	if err != nil {
		return 0, 0, err
	}
	pids, err := cg.PidsRefusals()
	if err != nil {
		return 0, 0, err
	}
	newOOM, newPids = h.since(oom, pids)
	return newOOM, newPids, nil
}

// since counts the hits of counters that read oom and pids now.
func (h *Hits) since(oom, pids int) (newOOM, newPids int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known {
		newOOM, newPids = max(oom-h.oom, 0), max(pids-h.pids, 0)
	}
	h.known, h.oom, h.pids = true, oom, pids
	return newOOM, newPids
}

// Counted is shown, a workload's limit hits as its status shows them (nil:
// none yet), with newOOM OOM kills and newPids refused forks more, at at.
// It is a new count: the one shown may be in a reader's hands.
func Counted(shown *status.LimitHits, newOOM, newPids int, at time.Time) *status.LimitHits {
	var h status.LimitHits
	if shown != nil {
		h = *shown
	}
	if newOOM > 0 {
		h.OOMKills += newOOM
		h.LastOOMKill = &at
	}
	if newPids > 0 {
		h.PidsRefusals += newPids
		h.LastRefusal = &at
	}
	return &h
}
