package supervisor

import (
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// newSupervisor is New over the parts a daemon opens for it under cfg's
// directories: the records, the event bus and a network plane without a
// pool or a firewall.
func newSupervisor(cfg Config) (*Supervisor, error) {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	st, err := records.Open(cfg.StateDir, cfg.RunDir, log)
	if err != nil {
		return nil, err
	}
	bus, err := events.Open(filepath.Join(cfg.StateDir, "events.log"))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("event history: %w", err)
	}
	net, err := netplane.Open(netplane.Config{Store: st, StateDir: cfg.StateDir, RunDir: cfg.RunDir, Logger: log, Cgroups: cfg.Cgroups,
		ContainerPorts: func(k spec.Kind) bool {
			for _, d := range cfg.Drivers {
				if d.Kind() == k {
					return d.Capabilities().ContainerPorts
				}
			}
			return false
		},
		Event: func(ev status.Event) { ev.Time = time.Now(); _ = bus.Publish(ev) },
	})
	if err != nil {
		bus.Close()
		st.Close()
		return nil, err
	}
	cfg.Store, cfg.Events, cfg.Net = st, bus, net
	s, err := New(cfg)
	if err != nil {
		bus.Close()
		st.Close()
		return nil, err
	}
	return s, nil
}

// shut closes s and then its parts, in a daemon's order.
func shut(s *Supervisor) {
	s.Close()
	s.net.Wait()
	s.events.Close()
	_ = s.store.Close()
}
