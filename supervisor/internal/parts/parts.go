// Package parts opens, for tests, the parts a daemon opens for its
// supervisor: the records, the event bus, a network plane without a
// pool or a firewall and the workspace documents, under a state and a run directory; and closes them
// in a daemon's order. The supervisor's own tests and supervisortest, for
// the packages above it, both open theirs here. It is not the daemon's
// assembly, which is package daemon's.
package parts

import (
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/workspace"
)

// Parts are what a supervisor is built over.
type Parts struct {
	Store      *records.Store
	Events     *events.Bus
	Net        *netplane.Plane
	Workspaces *workspace.Set
}

// Open opens the parts under stateDir and runDir. The plane maps the
// container ports of the kinds whose runtime in drivers says so, and
// publishes its events on the bus; cgroups may be nil.
func Open(stateDir, runDir string, log *zap.Logger, cgroups *sandbox.Cgroups, drivers []driver.Driver) (*Parts, error) {
	if log == nil {
		log = zap.NewNop()
	}
	st, err := records.Open(stateDir, runDir, log)
	if err != nil {
		return nil, err
	}
	bus, err := events.Open(filepath.Join(stateDir, "events.log"))
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("event history: %w", err)
	}
	runtimes := driver.NewRuntimes(drivers)
	net, err := netplane.Open(netplane.Config{Store: st, StateDir: stateDir, RunDir: runDir, Logger: log, Cgroups: cgroups,
		ContainerPorts: func(k spec.Kind) bool { return runtimes.Capabilities(k).ContainerPorts },
		Event:          func(ev status.Event) { ev.Time = time.Now(); _ = bus.Publish(ev) },
	})
	if err != nil {
		bus.Close()
		_ = st.Close()
		return nil, err
	}
	return &Parts{Store: st, Events: bus, Net: net, Workspaces: workspace.Open(st, log)}, nil
}

// Close closes the parts once the supervisor over them is closed, in a
// daemon's order: the links of the networks the plane deleted waited
// for, then the bus, then the records.
func (p *Parts) Close() {
	p.Net.Wait()
	p.Events.Close()
	_ = p.Store.Close()
}
