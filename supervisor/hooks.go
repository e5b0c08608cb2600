package supervisor

import (
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/runhook"
)

// A run's concerns are its hooks (runhook.Hook), each owned by its
// concern's package: the network it joins (netplane's), its cgroup and
// limits (usage.CgroupHook), its log (logpipe.Hook), its project's
// /dev/shm and its own /tmp (mounts.Hook), its checks (health.Hook), each taking part in the
// phases it implements. They acquire in that order before a run starts, or
// again for a run adopted, and release in reverse once it ended, as a
// runhook.Chain; what workload held across its runs, the hooks shared by
// every workload release once it is removed (s.hooks.Destroy). The run
// record (saveRun) keeps what they keep for a later daemon; the registry
// follows the workload's state (publishInstances), not a run.

// hooks are w's runs' hooks, in the order they acquire. The health hook
// is made for the first spec that has checks, and kept from then on: a
// workload without checks costs none of its memory.
func (w *workload) hooks() runhook.Chain {
	shared := w.s.hooks[:len(w.s.hooks):len(w.s.hooks)]
	if w.health == nil && w.spec.Health == nil {
		return shared
	}
	if w.health == nil {
		w.health = w.newHealth()
	}
	return append(shared, w.health)
}

// prestart acquires what a run needs (runhook.Chain: when a hook fails,
// those before it release theirs and the run does not start).
func (w *workload) prestart(r *runhook.Run) error {
	if err := w.hooks().Prestart(w.s.ctx, r); err != nil {
		return err
	}
	w.run = r
	return nil
}

// adopt has every hook acquire again what r, a live run of an earlier
// daemon (or one that may be), holds.
func (w *workload) adopt(r *runhook.Run) {
	w.hooks().Adopt(w.s.ctx, r)
	w.run = r
}

// poststart tells every hook that the current run is shown running.
func (w *workload) poststart() {
	w.run.Process = w.proc.State()
	w.hooks().Poststart(w.s.ctx, w.run)
}

// release has the hooks release what the current run held, in reverse:
// it ended, or never started.
func (w *workload) release() {
	if w.run != nil {
		w.hooks().Exited(w.s.ctx, w.run)
		w.run = nil
	}
}

// newRun is a run of w's spec in its runtime, before its hooks acquire.
func (w *workload) newRun() *runhook.Run {
	return &runhook.Run{Task: driver.Task{Workload: w.name, Spec: w.spec}, Driver: w.s.drivers[w.spec.Kind]}
}
