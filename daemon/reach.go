package daemon

import (
	"context"
	"fmt"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/sandbox"
)

// Reach serves GET /v1/reach and the refusal metric: each endpoint's
// derived allow-list, as the network plane projects it, of one workload's
// endpoints when name is not "" (a workload the supervisor does not have
// is not found).
func (b *Backend) Reach(ctx context.Context, name string) ([]api.ReachEndpoint, error) {
	if name != "" {
		if _, err := b.s.Get(ctx, name); err != nil {
			return nil, err
		}
	}
	return api.ReachEndpoints(b.parts.Plane.Reach(name)), nil
}

// hostReach reads --reach-host: the host's network under declared reach
// needs what tells its workloads' sockets apart, or the daemon refuses to
// start rather than run it open.
func hostReach(cfg Config, fw *firewall.Firewall, cgroups *sandbox.Cgroups) (bool, error) {
	switch cfg.ReachHost {
	case "", "off":
		return false, nil
	case "declared":
	default:
		return false, fmt.Errorf("%w: --reach-host %q: declared or off", errdefs.ErrInvalid, cfg.ReachHost)
	}
	switch {
	case fw == nil:
		return false, fmt.Errorf("%w: --reach-host declared: it is enforced with nf_tables, and this daemon has none (see the log above)", errdefs.ErrUnavailable)
	case cgroups == nil:
		return false, fmt.Errorf("%w: --reach-host declared: it tells workloads apart by their cgroups, and this daemon has none", errdefs.ErrUnavailable)
	}
	if _, err := cgroups.SocketTree(); err != nil {
		return false, fmt.Errorf("--reach-host declared: %w", err)
	}
	return true, nil
}
