// Package supervisortest opens a real supervisor for the tests of the
// packages above it, over the parts a daemon would open for it (records,
// event bus, a network plane without a pool or a firewall), and closes them
// all in a daemon's order when the test ends. It is not the daemon's
// assembly, which is package daemon's.
package supervisortest

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
)

// Open is a supervisor of cfg over parts opened under cfg's directories;
// cfg's Store, Events and Net are set here.
func Open(t testing.TB, cfg supervisor.Config) *supervisor.Supervisor {
	t.Helper()
	s, _ := OpenWithParts(t, cfg)
	return s
}

// OpenWithParts is Open, and cfg with the parts opened for it, for a test
// of a package built over them beside the supervisor (the documents).
func OpenWithParts(t testing.TB, cfg supervisor.Config) (*supervisor.Supervisor, supervisor.Config) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	st, err := records.Open(cfg.StateDir, cfg.RunDir, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	bus, err := events.Open(filepath.Join(cfg.StateDir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	net, err := netplane.Open(netplane.Config{Store: st, StateDir: cfg.StateDir, RunDir: cfg.RunDir, Logger: cfg.Logger, Cgroups: cfg.Cgroups,
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
		t.Fatal(err)
	}
	t.Cleanup(net.Wait)
	cfg.Store, cfg.Events, cfg.Net = st, bus, net
	s, err := supervisor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, cfg
}
