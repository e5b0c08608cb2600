// Package supervisortest opens a real supervisor for the tests of the
// packages above it, over the parts a daemon would open for it (records,
// event bus, a network plane without a pool or a firewall: parts.Open),
// and closes them all in a daemon's order when the test ends. It is not the daemon's
// assembly, which is package daemon's.
package supervisortest

import (
	"testing"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/supervisor/internal/parts"
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
	p, err := parts.Open(cfg.StateDir, cfg.RunDir, cfg.Logger, cfg.Cgroups, cfg.Drivers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cfg.Store, cfg.Events, cfg.Net, cfg.Workspaces = p.Store, p.Events, p.Net, p.Workspaces
	s, err := supervisor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, cfg
}
