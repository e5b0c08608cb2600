package supervisor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// cgroup creates (or reuses) the workload's cgroup with its limits;
// nil when the host gives flyd no cgroups.
func (s *Supervisor) cgroup(name string, l sandbox.Limits) (*sandbox.Cgroup, error) {
	if s.cfg.Cgroups == nil {
		return nil, nil
	}
	cg, err := s.cfg.Cgroups.Create(name, l)
	if err != nil {
		return nil, err
	}
	// Under declared reach, the rules name its cgroup before it runs.
	if err := s.net.Placed(name); err != nil {
		return nil, err
	}
	if cg.Fresh {
		return cg, nil
	}
	// A new run starts only when the last one is over: whatever is still
	// in the cgroup outlived its run (a daemon was down when it ended).
	if left, _ := cg.Procs(); len(left) > 0 {
		s.log.Warn("killing processes a finished run left", zap.String("workload", name), zap.Ints("pids", left))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cg.Kill(ctx); err != nil {
			return nil, err
		}
	}
	return cg, nil
}

func limits(r *spec.Resources) (sandbox.Limits, error) {
	if r == nil {
		return sandbox.Limits{}, nil
	}
	l := sandbox.Limits{MemoryMax: int64(r.MemoryMax), CPUWeight: r.CPUWeight, PidsMax: r.PidsMax}
	if r.CPUMax != "" {
		cores, err := strconv.ParseFloat(r.CPUMax, 64)
		if err != nil {
			return l, fmt.Errorf("%w: resources.cpu_max %q is not a number of cores", errdefs.ErrInvalid, r.CPUMax)
		}
		l.CPUMax = cores
	}
	return l, nil
}

// deleteCgroup removes a workload's cgroup, killing what is left in it.
func (s *Supervisor) deleteCgroup(name string) {
	if s.cfg.Cgroups == nil {
		return
	}
	g, err := s.cfg.Cgroups.Open(name)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Kill(ctx); err != nil {
		s.log.Warn("cannot empty a cgroup", zap.String("workload", name), zap.Error(err))
	}
	if err := g.Delete(); err != nil {
		s.log.Warn("cannot delete a cgroup", zap.String("workload", name), zap.Error(err))
	}
}

// sweepCgroups removes the cgroups of workloads not in keep, with
// whatever still runs in them.
func (s *Supervisor) sweepCgroups(keep map[string]bool) {
	if s.cfg.Cgroups == nil {
		return
	}
	names, err := s.cfg.Cgroups.List()
	if err != nil {
		s.log.Warn("cannot list cgroups", zap.Error(err))
		return
	}
	for _, n := range names {
		if !keep[n] {
			s.log.Info("deleting a cgroup no spec owns", zap.String("cgroup", n))
			s.deleteCgroup(n)
		}
	}
}

// holdWriters freezes a workload's cgroup around a log rotation, so that
// no line it writes falls between the copy and the truncate; nil without
// cgroups (the rotation then has its small loss window).
func (s *Supervisor) holdWriters(name string) func() (func(), error) {
	if s.cfg.Cgroups == nil {
		return nil
	}
	return func() (func(), error) {
		g, err := s.cfg.Cgroups.Open(name)
		if err != nil {
			return func() {}, nil // no run: nobody writes
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.Freeze(ctx)
	}
}
