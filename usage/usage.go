// Package usage reads what workloads' cgroups say of their runs: the CPU,
// memory and processes they use, sampled at most once an interval however
// many readers ask, and the hits of their limits (OOM kills, forks
// refused) since the last look, watched in the workloads that have a
// limit (Limits). Its CgroupHook is the cgroup-and-limits step of a run
// (runhook.Hook): the workload's cgroup made with its spec's limits
// (through sandbox, which knows the kernel's files), emptied of what an
// earlier run left, watched, and deleted with the workload. What a hit
// means to a workload is the supervisor's.
package usage

import (
	"sort"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/status"
)

// Interval is how often the workloads' usage is sampled, at most: however
// many readers poll (every `flyd top`), the cgroups are read once an
// interval.
const Interval = 2 * time.Second

// Sampler samples the usage of the workloads that run.
type Sampler struct {
	cgroups   *sandbox.Cgroups // nil: none to read
	workloads func() []status.Workload

	// mu guards last, and is held through a sample, so that readers who
	// ask at once share one; the supervisor's lock is taken under it
	// (workloads), never the other way.
	mu   sync.Mutex
	last status.Stats
}

// NewSampler reads the cgroups of those of the workloads (the
// supervisor's, as it lists them) that have a run now: a process id.
func NewSampler(cgroups *sandbox.Cgroups, workloads func() []status.Workload) *Sampler {
	return &Sampler{cgroups: cgroups, workloads: workloads}
}

// Sample is a sample of every running workload's usage no older than
// Interval, by workload name.
func (s *Sampler) Sample() status.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.last.At) < Interval {
		return s.last
	}
	st := status.Stats{At: time.Now(), Interval: Interval, Workloads: []status.Usage{}}
	if s.cgroups != nil {
		for _, w := range s.workloads() {
			if w.PID == 0 {
				continue // no run: what its cgroup holds is not its
			}
			name := w.Name
			g, err := s.cgroups.Open(name)
			if err != nil {
				continue // its run ended meanwhile
			}
			u, err := g.Usage()
			if err != nil {
				continue
			}
			st.Workloads = append(st.Workloads, status.Usage{Workload: name, CPU: u.CPU, Memory: u.Memory, Procs: u.Procs})
		}
	}
	sort.Slice(st.Workloads, func(i, j int) bool { return st.Workloads[i].Workload < st.Workloads[j].Workload })
	s.last = st
	return st
}
