package supervisor

import (
	"sort"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/status"
)

// statsInterval is how often the workloads' usage is sampled, at most:
// however many readers poll (every `flyd top`), the cgroups are read once
// an interval.
const statsInterval = 2 * time.Second

// statsCache is the last sample.
type statsCache struct {
	mu   sync.Mutex
	last status.Stats
}

// stats is a sample of every running workload's usage no older than
// statsInterval.
func (s *Supervisor) stats() status.Stats {
	c := &s.statsCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.last.At) < statsInterval {
		return c.last
	}
	st := status.Stats{At: time.Now(), Interval: statsInterval, Workloads: []status.Usage{}}
	if s.cfg.Cgroups != nil {
		for _, w := range s.all() {
			if w.snapshot(false).PID == 0 {
				continue // no run
			}
			g, err := s.cfg.Cgroups.Open(w.name)
			if err != nil {
				continue
			}
			u, err := g.Usage()
			if err != nil {
				continue
			}
			st.Workloads = append(st.Workloads, status.Usage{Workload: w.name, CPU: u.CPU, Memory: u.Memory, Procs: u.Procs})
		}
	}
	sort.Slice(st.Workloads, func(i, j int) bool { return st.Workloads[i].Workload < st.Workloads[j].Workload })
	c.last = st
	return st
}
