package usage

import (
	"context"
	"sync"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
)

// LimitCheck is how often the watched workloads' limit counters are read.
const LimitCheck = time.Second

// Limits watches the workloads that have a memory or pids limit: every
// LimitCheck it reads each one's OOM kill and pids refusal counters and
// tells hit of what they gained. It walks only the workloads watched,
// however many there are without a limit.
type Limits struct {
	cgroups *sandbox.Cgroups // nil: nothing to watch
	hit     func(name string, newOOM, newPids int, at time.Time)

	// mu guards watched (the map; each Hits locks itself), and is never
	// held while a Hits' lock is taken or a cgroup read.
	mu      sync.Mutex
	watched map[string]*Hits
}

// NewLimits watches the cgroups of cgroups; hit is called, from Run's
// goroutine, with the hits a workload's counters gained since the last
// look.
func NewLimits(cgroups *sandbox.Cgroups, hit func(name string, newOOM, newPids int, at time.Time)) *Limits {
	return &Limits{cgroups: cgroups, hit: hit, watched: map[string]*Hits{}}
}

// Watch has the limits of workload name watched, or keeps watching them
// where it counted: its spec sets a limit.
func (l *Limits) Watch(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watched[name] == nil {
		l.watched[name] = &Hits{}
	}
}

// Unwatch forgets workload name's counting: its spec sets no limit, or
// it is gone.
func (l *Limits) Unwatch(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.watched, name)
}

// Baseline takes cg's counters as where a watched workload's counting
// starts, unless it was counting (Hits.Baseline): a run's launch calls it
// before the run begins.
func (l *Limits) Baseline(name string, cg *sandbox.Cgroup) {
	l.mu.Lock()
	h := l.watched[name]
	l.mu.Unlock()
	if h != nil {
		h.Baseline(cg)
	}
}

// Run looks at the watched workloads' counters every LimitCheck until ctx
// is done.
func (l *Limits) Run(ctx context.Context) {
	if l.cgroups == nil {
		return
	}
	t := time.NewTicker(LimitCheck)
	defer t.Stop()
	type watched struct {
		name string
		hits *Hits
	}
	// One slice for every pass, not a fresh one each second.
	var all []watched
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.mu.Lock()
			all = all[:0]
			for name, h := range l.watched {
				all = append(all, watched{name, h})
			}
			l.mu.Unlock()
			for _, w := range all {
				cg, err := l.cgroups.Open(w.name)
				if err != nil {
					continue // no run yet
				}
				newOOM, newPids, err := w.hits.Look(cg)
				if err == nil && (newOOM > 0 || newPids > 0) {
					l.hit(w.name, newOOM, newPids, now)
				}
			}
			clear(all)
		}
	}
}
