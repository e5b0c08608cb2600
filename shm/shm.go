// Package shm gives the runs of a project's host workloads (native, Nix)
// a /dev/shm of the project's own, as the containers of a pod share one:
// a tmpfs made at the project's first run, bound at /dev/shm in each run's
// mount namespace, invisible to the host and to every other project, and
// gone, with its files, once the project's last run ended (a down ends
// them all). Its hook (Hook) holds the project's tmpfs for each run; the
// tmpfs itself is sandbox's (sandbox.Shms). The default project's runs,
// and containers (which have a /dev/shm of their own), keep what they
// had.
package shm

import (
	"context"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// Hook holds a project's /dev/shm for each of its host runs.
type Hook struct {
	shms *sandbox.Shms
	log  *zap.Logger
}

// NewHook keeps the projects' /dev/shm in shms; nil shms gives every run
// the host's.
func NewHook(shms *sandbox.Shms, log *zap.Logger) *Hook { return &Hook{shms: shms, log: log} }

// Name is the hook's: "shm".
func (h *Hook) Name() string { return "shm" }

// project is the project whose /dev/shm r gets, or "".
func (h *Hook) project(r *runhook.Run) string {
	if h == nil || h.shms == nil || r.Task.Spec == nil || r.Driver == nil || r.Driver.Capabilities().RuntimeContext == "container" {
		return ""
	}
	return spec.ProjectOf(r.Task.Workload)
}

// Prestart holds the run's project's /dev/shm and tells the runtime where
// it is.
func (h *Hook) Prestart(_ context.Context, r *runhook.Run) error {
	p := h.project(r)
	if p == "" {
		return nil
	}
	dir, err := h.shms.Acquire(p)
	if err != nil {
		return err
	}
	r.Task.Shm = dir
	return nil
}

// Adopt counts a run an earlier daemon started, which holds its
// project's /dev/shm in its mount namespace.
func (h *Hook) Adopt(_ context.Context, r *runhook.Run) {
	if p := h.project(r); p != "" {
		h.shms.Hold(p)
	}
}

// Exited lets the run's hold go: the project's last run takes its
// /dev/shm with it.
func (h *Hook) Exited(_ context.Context, r *runhook.Run) {
	if p := h.project(r); p != "" {
		if err := h.shms.Release(p); err != nil {
			h.log.Warn("a project's /dev/shm outlives its last run", zap.String("project", p), zap.Error(err))
		}
	}
}

// Sweep removes the /dev/shm no run holds, once the runs of an earlier
// daemon are adopted.
func (h *Hook) Sweep() {
	if h == nil || h.shms == nil {
		return
	}
	if err := h.shms.Sweep(); err != nil {
		h.log.Warn("projects' /dev/shm that no run holds are left", zap.Error(err))
	}
}
