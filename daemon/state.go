package daemon

import (
	"cmp"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// openState opens what the daemon keeps across restarts, before anything
// that reports into it or reads it: the records (desired state, documents,
// run records) and the event bus with its history.
func openState(cfg Config, log *zap.Logger) (*records.Store, *events.Bus, error) {
	st, err := records.Open(cfg.StateDir, cfg.RunDir, log)
	if err != nil {
		return nil, nil, err
	}
	bus, err := events.Open(filepath.Join(cfg.StateDir, "events.log"))
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("event history: %w", err)
	}
	return st, bus, nil
}

// publisher puts the events of the parts beside the supervisor (the
// network plane, the registrar) on the bus, stamped as the supervisor
// stamps its own.
func publisher(bus *events.Bus, log *zap.Logger) func(status.Event) {
	return func(ev status.Event) {
		ev.Time = time.Now()
		ev.Project = cmp.Or(ev.Project, spec.ProjectOf(ev.Workload))
		if err := bus.Publish(ev); err != nil {
			log.Warn("cannot keep events for readers that resume; they still go to those reading now", zap.Error(err))
		}
	}
}

// registryProblem reports a registration that fails, or recovers (err
// nil), as an event. The registrar calls it; it must not block.
func registryProblem(publish func(status.Event)) func(owner, id string, err error) {
	return func(owner, id string, err error) {
		ev := status.Event{Type: status.EventRegistry, Workload: owner, Message: id + " registered again"}
		if err != nil {
			ev.Message = id + ": " + err.Error()
		}
		publish(ev)
	}
}
