package daemon

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/internal/instance"
	"github.com/flyd-dev/flyd/sandbox"
)

// DefaultNetworkPool is where isolated networks' links come from unless
// --network-pool says otherwise: private, and rarely routed.
const DefaultNetworkPool = "10.213.0.0/16"

// networkLinks reads --network-pool, refuses one the host already routes,
// and opens the firewall that gives the networks their way out. Without
// nf_tables the networks still get their links, and no way out.
func networkLinks(cfg Config, log *zap.Logger) (netip.Prefix, *firewall.Firewall, error) {
	if cfg.NetworkPool == "off" {
		return netip.Prefix{}, nil, nil
	}
	pool, err := netip.ParsePrefix(cfg.NetworkPool)
	if err != nil {
		return netip.Prefix{}, nil, fmt.Errorf("--network-pool %q: an IPv4 prefix such as %s, or off: %v", cfg.NetworkPool, DefaultNetworkPool, err)
	}
	if err := sandbox.CheckPool(pool); err != nil {
		return netip.Prefix{}, nil, err
	}
	runDir, err := filepath.Abs(cfg.RunDir)
	if err != nil {
		return netip.Prefix{}, nil, err
	}
	fw, err := firewall.New(instance.Name(runDir))
	if err != nil {
		log.Warn("isolated networks get no way out through the host", zap.Error(err))
		return pool, nil, nil
	}
	return pool, fw, nil
}
