package daemon

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/connectmap"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/internal/instance"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
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

// openPlane opens the network plane over the daemon's records: a runtime's
// endpoints hash as its capabilities say, and what the plane reports goes
// on the bus through publish.
func openPlane(cfg Config, st *records.Store, drivers []driver.Driver, pool netip.Prefix, fw *firewall.Firewall,
	cm *connectmap.Map, cmOff string, cgroups *sandbox.Cgroups, reachHost bool, publish func(status.Event), log *zap.Logger) (*netplane.Plane, error) {
	ports := map[spec.Kind]bool{}
	for _, d := range drivers {
		ports[d.Kind()] = d.Capabilities().ContainerPorts
	}
	return netplane.Open(netplane.Config{
		Store: st, StateDir: cfg.StateDir, RunDir: cfg.RunDir,
		Pool: pool, Firewall: fw, AdvertiseAddress: cfg.AdvertiseAddress, Logger: log,
		ContainerPorts: func(k spec.Kind) bool { return ports[k] },
		Cgroups:        cgroups, HostReach: reachHost, Event: publish,
		Connect: cm, ConnectOff: cmOff,
	})
}

// openConnectMap attaches the programs that take a host-local client of a
// published port to its network at connect(), when there are published
// ports (a pool and nf_tables, whose DNAT stays beneath), and says once
// which way published ports go; off says why it is nftables alone. With
// disabled (--publish-at-connect=false) it is nftables alone.
func openConnectMap(fw *firewall.Firewall, disabled bool, log *zap.Logger) (cm *connectmap.Map, off string) {
	if fw == nil {
		return nil, ""
	}
	if disabled {
		log.Info("published ports go through nftables alone: --publish-at-connect=false")
		return nil, "--publish-at-connect=false"
	}
	cm, err := connectmap.Open(connectmap.Config{})
	if err != nil {
		log.Info("published ports go through nftables alone: BPF at connect() is not available", zap.Error(err))
		return nil, err.Error()
	}
	log.Info("published ports are rewritten at connect() for the host's own clients (BPF), nftables DNAT beneath",
		zap.String("cgroup", cm.Cgroup()))
	return cm, ""
}
