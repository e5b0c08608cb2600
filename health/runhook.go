package health

import (
	"time"

	"github.com/flyd-dev/flyd/runhook"
)

// The Hook is the notify-and-health step of a workload's runs
// (runhook.Hook): its checks made ready before a run starts, started once
// it runs, stopped once it ended; what the run said of its readiness is
// kept in the run's record (runhook.Kept) and given back on adoption.

// Prestart readies the run's checks (Prepare), telling the program what
// it must be told in r.Env; its notify socket is its user's.
func (h *Hook) Prestart(r *runhook.Run) error {
	h.user = r.Task.Spec.User
	if err := h.Prepare(r.Task.Spec.Health, r.Env); err != nil {
		return err
	}
	h.run = r
	r.Ready, r.LogFrom = h.ready, h.told.LogFrom
	return nil
}

// Adopt takes what an earlier daemon kept of the run (Adopted).
func (h *Hook) Adopt(r *runhook.Run) {
	h.run, h.user = r, r.Task.Spec.User
	h.Adopted(r.Ready, r.LogFrom)
}

// Poststart starts checking the run, from when it started (an adopted
// run's start, not the daemon's).
func (h *Hook) Poststart(r *runhook.Run) {
	h.SetPID(r.Process.PID)
	started := time.Now()
	if !r.Process.StartedAt.IsZero() {
		started = r.Process.StartedAt
	}
	h.Start(r.Task.Spec.Health, started)
}

// Exited stops the run's checks (Stop).
func (h *Hook) Exited(*runhook.Run) {
	h.Stop()
	h.run = nil
}

// Destroy does nothing: the checks went with the run.
func (h *Hook) Destroy(string) {}

// said records that the run said it is ready, which it says once: in the
// run's record, by its owner.
func (h *Hook) said() {
	h.ready = true
	if h.run != nil {
		h.run.Ready = true
	}
	h.cfg.Ready()
}
