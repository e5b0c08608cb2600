package health

import (
	"context"
	"time"

	"github.com/flyd-dev/flyd/runhook"
)

// The Hook is the notify-and-health step of a workload's runs
// (runhook.Hook): its checks made ready before a run starts, started once
// it runs, stopped once it ended; what the run said of its readiness is
// kept in the run's record (runhook.Kept) and given back on adoption.

// The fields of a run's record the hook keeps: the run said it is
// ready (a notify workload's READY=1, which it says once, or a log check's
// line), and where its output begins in its log, for its log check.
const (
	keptReady   = "ready"
	keptLogFrom = "log_from"
)

// Name is the hook's: "health".
func (h *Hook) Name() string { return "health" }

// Prestart readies the run's checks (Prepare), telling the program what
// it must be told in r.Env; its notify socket is its user's.
func (h *Hook) Prestart(_ context.Context, r *runhook.Run) error {
	h.user = r.Task.Spec.User
	if err := h.Prepare(r.Task.Spec.Health, r.Env); err != nil {
		return err
	}
	h.run = r
	r.Kept.Set(keptReady, h.ready)
	r.Kept.Set(keptLogFrom, h.told.LogFrom)
	return nil
}

// Adopt takes what an earlier daemon kept of the run (Adopted).
func (h *Hook) Adopt(_ context.Context, r *runhook.Run) {
	h.run, h.user = r, r.Task.Spec.User
	var ready bool
	var from *int64
	r.Kept.Get(keptReady, &ready)
	r.Kept.Get(keptLogFrom, &from)
	h.Adopted(ready, from)
}

// Poststart starts checking the run, from when it started (an adopted
// run's start, not the daemon's).
func (h *Hook) Poststart(_ context.Context, r *runhook.Run) {
	h.SetPID(r.Process.PID)
	started := time.Now()
	if !r.Process.StartedAt.IsZero() {
		started = r.Process.StartedAt
	}
	h.Start(r.Task.Spec.Health, started)
}

// Exited stops the run's checks (Stop).
func (h *Hook) Exited(context.Context, *runhook.Run) {
	h.Stop()
	h.run = nil
}

// The hook takes part in no Destroy: the checks went with the run.

// said records that the run said it is ready, which it says once: in the
// run's record, by its owner.
func (h *Hook) said() {
	h.ready = true
	if h.run != nil {
		h.run.Kept.Set(keptReady, true)
	}
	h.cfg.Ready()
}
