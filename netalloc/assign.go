package netalloc

import (
	"context"
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
)

// Assign makes the workload's reservations in network exactly reqs, all
// or nothing. A request matching the endpoint's current reservation (the
// same hashed or fixed port, or ephemeral for an ephemeral one) keeps it
// without a probe; a new one is reserved after the table and the
// namespace are checked; the workload's reservations that reqs no longer
// name are released. On any failure nothing changes. The reservations are
// returned in the order of reqs.
func (m *Manager) Assign(ctx context.Context, network string, ns Namespace, workload string, reqs []Request) ([]Reservation, error) {
	if err := checkNetwork(network); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		if err := r.check(workload); err != nil {
			return nil, err
		}
		if seen[r.Endpoint] {
			return nil, fmt.Errorf("%w: workload %s names endpoint %s twice", errdefs.ErrInvalid, workload, r.Endpoint)
		}
		seen[r.Endpoint] = true
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	t := m.table(network)
	t.mu.Lock()
	defer t.mu.Unlock()

	// Start from the table without this workload: each of its endpoints
	// either claims its port back below or is released by omission.
	next := t.changing(workload)
	prior := map[string]Reservation{}
	ownPorts := map[int]bool{}
	for port, r := range t.own(workload) {
		prior[r.Endpoint] = r
		ownPorts[port] = true
	}

	out := make([]Reservation, len(reqs))
	var fresh []int // indexes of requests that need a new port
	// Kept ports first, so that a new request of the same call cannot take
	// a port an unchanged endpoint is listening on.
	for i, req := range reqs {
		p, ok := prior[req.Endpoint]
		if !ok || !req.keeps(p) {
			fresh = append(fresh, i)
			continue
		}
		p.Mode = req.Mode // hashed and fixed may trade names for one number
		next.own[p.Port] = p
		out[i] = p
	}
	// Numbered ports before ephemeral ones: the kernel must not pick a
	// number that a request of this call is about to claim.
	for _, i := range fresh {
		req := reqs[i]
		if req.Mode == ModeEphemeral {
			continue
		}
		if holder, taken := next.holder(req.Port); taken {
			e := heldBy(holder)
			e.Hashed = req.Mode == ModeHashed && holder.Mode == ModeHashed
			return nil, fmt.Errorf("endpoint %s: %w", req.Endpoint, e)
		}
		// A port this workload held until now is not probed: whatever
		// listens on it is most likely the workload itself.
		if !ownPorts[req.Port] {
			if err := checkForeign(ns, network, req.Port); err != nil {
				return nil, fmt.Errorf("endpoint %s: %w", req.Endpoint, err)
			}
		}
		r := Reservation{Network: network, Port: req.Port, Workload: workload, Endpoint: req.Endpoint, Mode: req.Mode}
		next.own[r.Port] = r
		out[i] = r
	}
	for _, i := range fresh {
		req := reqs[i]
		if req.Mode != ModeEphemeral {
			continue
		}
		r := Reservation{Network: network, Workload: workload, Endpoint: req.Endpoint, Mode: ModeEphemeral}
		port, err := m.temporaryPort(ctx, ns, next, r)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", req.Endpoint, err)
		}
		r.Port = port
		out[i] = r
	}
	if !next.changes() {
		return out, nil // nothing to write: a restart re-applying its spec
	}
	if err := m.commit(next); err != nil {
		return nil, err
	}
	return out, nil
}
