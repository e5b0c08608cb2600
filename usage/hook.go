package usage

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// CgroupHook is the cgroup-and-limits step of every workload's runs
// (runhook.Hook): before a run starts, its workload's cgroup, made or
// reused, with the spec's limits, emptied of what an earlier run left, and
// the limit watcher following it; once the workload is gone, the cgroup
// deleted and the watch forgotten. The cgroup outlives each run: a run
// that ends leaves it to the next, which finds there whatever outlived
// its predecessor.
type CgroupHook struct {
	cgroups *sandbox.Cgroups // nil: the host gives flyd none
	limits  *Limits
	// placed tells the network plane that a workload's cgroup is there,
	// so that its rules name it before the run starts.
	placed func(workload string) error
	log    *zap.Logger
}

// NewCgroupHook makes the cgroups of cgroups (nil: none, and a spec's
// resources are then refused before they reach it), watched by limits;
// placed hears that a workload's cgroup exists, before its run starts.
func NewCgroupHook(cgroups *sandbox.Cgroups, limits *Limits, placed func(workload string) error, log *zap.Logger) *CgroupHook {
	return &CgroupHook{cgroups: cgroups, limits: limits, placed: placed, log: log}
}

// Name is the hook's: "cgroup".
func (h *CgroupHook) Name() string { return "cgroup" }

// Prestart gives the run its workload's cgroup, with the spec's limits.
func (h *CgroupHook) Prestart(_ context.Context, r *runhook.Run) error {
	lim, err := LimitsOf(r.Task.Spec.Resources)
	if err != nil {
		return err
	}
	r.Task.Limits = lim
	h.watch(r.Task.Spec)
	if h.cgroups == nil {
		return nil
	}
	name := r.Task.Workload
	cg, err := h.cgroups.Create(name, lim)
	if err != nil {
		return err
	}
	if err := h.placed(name); err != nil {
		return err
	}
	if !cg.Fresh {
		// A new run starts only when the last one is over: whatever is
		// still in the cgroup outlived its run (a daemon was down when
		// it ended).
		if left, _ := cg.Procs(); len(left) > 0 {
			h.log.Warn("killing processes a finished run left", zap.String("workload", name), zap.Ints("pids", left))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := cg.Kill(ctx); err != nil {
				return err
			}
		}
	}
	r.Task.Cgroup = cg
	h.limits.Baseline(name, cg)
	return nil
}

// Adopt has the limit watcher follow the adopted run's cgroup, which it
// holds already; its counting starts at the watcher's first look.
func (h *CgroupHook) Adopt(_ context.Context, r *runhook.Run) { h.watch(r.Task.Spec) }

// The hook takes part in no Poststart (the run was born in its cgroup)
// and no Exited: the cgroup, and its watch, are left to the next run, and
// the hits of the run's last moments are counted at the watcher's next
// look.

// Destroy deletes the workload's cgroup, killing what is left in it, and
// forgets its limits' counting.
func (h *CgroupHook) Destroy(ctx context.Context, workload string) {
	h.destroy(workload)
}

func (h *CgroupHook) destroy(workload string) {
	h.limits.Unwatch(workload)
	if h.cgroups == nil {
		return
	}
	g, err := h.cgroups.Open(workload)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Kill(ctx); err != nil {
		h.log.Warn("cannot empty a cgroup", zap.String("workload", workload), zap.Error(err))
	}
	if err := g.Delete(); err != nil {
		h.log.Warn("cannot delete a cgroup", zap.String("workload", workload), zap.Error(err))
	}
}

// Sweep deletes the cgroups of workloads not in keep, with whatever still
// runs in them.
func (h *CgroupHook) Sweep(keep map[string]bool) {
	if h.cgroups == nil {
		return
	}
	names, err := h.cgroups.List()
	if err != nil {
		h.log.Warn("cannot list cgroups", zap.Error(err))
		return
	}
	for _, n := range names {
		if !keep[n] {
			h.log.Info("deleting a cgroup no spec owns", zap.String("cgroup", n))
			h.destroy(n)
		}
	}
}

// HoldWriters freezes a workload's cgroup around a log rotation, so that
// no line it writes falls between the copy and the truncate; nil without
// cgroups (the rotation then has its small loss window).
func (h *CgroupHook) HoldWriters(workload string) func() (func(), error) {
	if h.cgroups == nil {
		return nil
	}
	return func() (func(), error) {
		g, err := h.cgroups.Open(workload)
		if err != nil {
			return func() {}, nil // no run: nobody writes
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.Freeze(ctx)
	}
}

// watch has the limit watcher follow a workload whose spec sets a memory
// or pids limit, and no other.
func (h *CgroupHook) watch(sp *spec.Workload) {
	if r := sp.Resources; r != nil && (r.MemoryMax != 0 || r.PidsMax != 0) {
		h.limits.Watch(sp.Name)
	} else {
		h.limits.Unwatch(sp.Name)
	}
}

// LimitsOf is a spec's resources as a cgroup's limits.
func LimitsOf(r *spec.Resources) (sandbox.Limits, error) {
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
