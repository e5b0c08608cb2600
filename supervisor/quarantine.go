package supervisor

// A stored record that does not load is quarantined (records.Quarantine):
// its record stays as it is, status and the log report it, and its run is
// kept alive with all it owns (run record, cgroup, carrier directory,
// network, ports). What a quarantined name blocks is decided here: nothing
// sweeps what it owns; applying the name replaces the record, once the old
// run is killed, since a second run must never start beside one that may
// be alive; removing the name kills the run and deletes the record.

import (
	"context"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/status"
)

func (s *Supervisor) logQuarantine() {
	for _, q := range s.quarantine.List() {
		s.log.Error("quarantined a stored workload that cannot be loaded: its record and its run are kept as they are; apply or remove the name to replace them",
			zap.String("workload", q.Name), zap.String("error", q.Error), zap.Int("pid", q.PID))
	}
}

// quarantinedNetworks is the quarantined names as the network plane
// keeps them: in the network their record names, or in every network
// while it names none and their run lives on.
func (s *Supervisor) quarantinedNetworks() map[string]netplane.Quarantined {
	out := map[string]netplane.Quarantined{}
	s.quarantine.Each(func(name string, bad records.Bad, running bool) {
		out[name] = netplane.Quarantined{Network: bad.Network, Running: running}
	})
	return out
}

// kept is every name whose state a starting daemon must not sweep: the
// specs', and the quarantined ones'.
func (s *Supervisor) kept(specs map[string]records.Workload) map[string]bool {
	keep := make(map[string]bool, len(specs))
	for n := range specs {
		keep[n] = true
	}
	for _, n := range s.quarantine.Names() {
		keep[n] = true
	}
	return keep
}

// claimQuarantine takes the quarantined record of name, if there is one,
// for op (an apply or a removal) of that name by c: its run is ended
// first. The claim lasts until release, so that applies and removals of
// the name do not interleave; a name no longer quarantined by then is not
// claimed.
func (s *Supervisor) claimQuarantine(ctx context.Context, name string, c authz.Caller, op authz.Op) (q *records.Quarantined, release func(), err error) {
	q, release, err = s.quarantine.Claim(ctx, name)
	if err != nil || q == nil {
		return nil, release, err
	}
	// Only the file's ownership is judged: a bad record keeps no applier.
	err = authz.Decide(authz.Caller{File: c.File, Force: c.Force}, op, authz.Doc{Name: name, Exists: true, Owner: q.Bad.Owner})
	if err == nil {
		err = s.quarantine.EndRun(ctx, q, s.drivers)
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return q, release, nil
}

// removeQuarantined removes a quarantined name: its run, its record and
// all it owned. notFound is the answer when the name is not quarantined.
func (s *Supervisor) removeQuarantined(ctx context.Context, name string, o authz.Caller, notFound error) error {
	q, release, err := s.claimQuarantine(ctx, name, o, authz.Remove)
	if err != nil {
		return err
	}
	if q == nil {
		release()
		if _, err := s.lookup(name); err == nil {
			return s.remove(ctx, name, o) // applied while we waited
		}
		return notFound
	}
	defer release()
	if err := s.quarantine.Remove(q); err != nil {
		return err
	}
	s.hooks.Destroy(s.ctx, name)
	s.net.Release(name, "")
	if n := q.Bad.Network; n != "" {
		s.net.Drop(n)
	}
	s.log.Info("removed a quarantined workload", zap.String("workload", name))
	s.publish(status.Event{Type: status.EventRemoved, Workload: name, Message: "quarantined record removed"})
	return nil
}
