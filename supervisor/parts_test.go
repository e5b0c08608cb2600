package supervisor

import (
	"github.com/flyd-dev/flyd/supervisor/internal/parts"
)

// newSupervisor is New over the parts a daemon opens for it under cfg's
// directories (parts.Open).
func newSupervisor(cfg Config) (*Supervisor, error) {
	p, err := parts.Open(cfg.StateDir, cfg.RunDir, cfg.Logger, cfg.Cgroups, cfg.Drivers)
	if err != nil {
		return nil, err
	}
	cfg.Store, cfg.Events, cfg.Net, cfg.Workspaces = p.Store, p.Events, p.Net, p.Workspaces
	s, err := New(cfg)
	if err != nil {
		p.Close()
		return nil, err
	}
	return s, nil
}

// shut closes s and then its parts, in a daemon's order.
func shut(s *Supervisor) {
	s.Close()
	(&parts.Parts{Store: s.store, Events: s.events, Net: s.net}).Close()
}
