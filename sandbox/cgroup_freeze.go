package sandbox

import (
	"context"
	"time"
)

// Freeze stops every process of the cgroup until thaw is called, for work
// that must see the workload hold still: a log rotation that may not lose
// a line it writes. It holds the cgroup's lock, so no start or kill runs
// meanwhile; keep it short. Without a freezer it does nothing.
func (g *Cgroup) Freeze(ctx context.Context) (thaw func(), err error) {
	unlock := lockCgroup(g.Path, true)
	frozen, err := g.setFrozen(ctx, true)
	if err != nil {
		if frozen {
			_, _ = g.setFrozen(context.Background(), false)
		}
		unlock()
		return nil, err
	}
	return func() {
		if frozen {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = g.setFrozen(ctx, false)
		}
		unlock()
	}, nil
}
