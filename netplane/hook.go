package netplane

import (
	"context"

	"github.com/flyd-dev/flyd/runhook"
)

// Hook is the network step of a workload's runs (runhook.Hook): a run
// joins the namespace of its spec's network, made on first use; nothing
// for the host's. What a workload holds of the plane (ports, declarations,
// its network's use) it holds from its apply to its removal (Attach and
// Detach), not a run at a time, so the step has nothing to release.
func (p *Plane) Hook() runhook.Hook { return joinHook{p} }

// Name is the hook's: "network".
func (joinHook) Name() string { return "network" }

type joinHook struct{ p *Plane }

// Prestart gives the run its network's namespace.
func (h joinHook) Prestart(_ context.Context, r *runhook.Run) (err error) {
	r.Task.Network, err = h.p.Namespace(r.Task.Spec.Network)
	return err
}

// The hook takes part in no other phase: the namespace is the network's,
// not the run's.
