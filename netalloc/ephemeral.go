package netalloc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

const (
	// maxAttempts bounds an allocation: transient failures that outlast
	// a few dozen milliseconds are not transient, and apply must answer.
	maxAttempts = 8
	// The backoff doubles from backoffStart to backoffMax, so eight
	// attempts wait about 113ms in all.
	backoffStart = time.Millisecond
	backoffMax   = 50 * time.Millisecond
)

// AllocateTemporaryPort reserves a kernel-chosen port for one endpoint of
// workload in network. It is the single allocation Assign makes for each
// new ephemeral endpoint. An endpoint that already holds an ephemeral port
// in network gets that port back: a workload keeps its port across its
// restarts and the daemon's.
//
// The table's lock is held for the whole allocation, backoff included, so
// a port is decided, recorded and persisted before any other allocation
// of the network looks at the table.
func (m *Manager) AllocateTemporaryPort(ctx context.Context, network string, ns Namespace, workload, endpoint string) (int, error) {
	if err := checkNetwork(network); err != nil {
		return 0, err
	}
	if err := checkHolder(workload, endpoint); err != nil {
		return 0, err
	}
	t := m.table(network)
	t.mu.Lock()
	defer t.mu.Unlock()
	if prior, ok := t.holder(workload, endpoint); ok {
		if prior.Mode == ModeEphemeral {
			return prior.Port, nil
		}
		return 0, fmt.Errorf("%w: workload %s endpoint %s already holds %s port %d in network %s",
			errdefs.ErrConflict, workload, endpoint, prior.Mode, prior.Port, network)
	}
	next := t.changing(workload)
	next.own = t.own(workload)
	port, err := m.temporaryPort(ctx, ns, next, Reservation{Network: network, Workload: workload, Endpoint: endpoint, Mode: ModeEphemeral})
	if err != nil {
		return 0, err
	}
	if err := m.commit(next); err != nil {
		return 0, err
	}
	return port, nil
}

// temporaryPort asks the kernel for a port until one is free in next too,
// records it in next and returns it. next is the change being built, so
// ports reserved earlier in the same Assign count as taken.
//
// A probe whose port collides with the table stays bound until the
// allocation ends. The kernel offers bind() the free ports of one parity
// first and would offer the same reserved, unbound ports again and again;
// held, they are out of its choice, so each retry makes progress.
func (m *Manager) temporaryPort(ctx context.Context, ns Namespace, next *change, r Reservation) (int, error) {
	var held []loopbackProbe
	defer func() {
		for _, p := range held {
			_ = p.close() // a port never handed out: nothing to undo
		}
	}()
	delay := backoffStart
	var last error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, delay); err != nil {
				return 0, fmt.Errorf("temporary port in network %s: %w", r.Network, err)
			}
			delay = min(2*delay, backoffMax)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("temporary port in network %s: %w", r.Network, err)
		}
		port, collided, err := m.tryTemporaryPort(ns, next, r)
		if collided != nil {
			held = append(held, *collided)
		}
		if err == nil {
			return port, nil
		}
		if !isRetryable(err) {
			return 0, err
		}
		last = err
	}
	return 0, fmt.Errorf("%w in network %s after %d attempts: %w", ErrTemporaryPortUnavailable, r.Network, maxAttempts, last)
}

// tryTemporaryPort is one attempt. The port goes into next while the probe
// still holds it, so neither the kernel nor the table can hand it to
// anyone else in between. A probe on a port the table holds is returned
// open, for the caller to hold.
func (m *Manager) tryTemporaryPort(ns Namespace, next *change, r Reservation) (int, *loopbackProbe, error) {
	var p loopbackProbe
	err := inNamespace(ns, r.Network, func() error {
		var err error
		p, err = m.bindLoopback()
		return err
	})
	if err != nil {
		return 0, nil, classify(r.Network, err)
	}
	if _, taken := next.holder(p.port); taken {
		return 0, &p, retryable{fmt.Errorf("port %d: %w", p.port, errCollision)}
	}
	r.Port = p.port
	next.own[p.port] = r
	if err := p.close(); err != nil {
		delete(next.own, p.port)
		return 0, nil, retryable{fmt.Errorf("close probe of port %d: %w", p.port, err)}
	}
	return p.port, nil, nil
}

// classify sorts a failed probe: a host that cannot bind loopback at all
// is refused at once, a namespace that cannot be entered is returned as
// it is, anything else is worth another attempt.
func classify(network string, err error) error {
	var enter *enterError
	switch {
	case errors.As(err, &enter), errors.Is(err, ErrTemporaryPortUnsupported):
		return err
	case errors.Is(err, errLoopbackDown),
		errors.Is(err, unix.EADDRNOTAVAIL), errors.Is(err, unix.ENETUNREACH),
		errors.Is(err, unix.ENETDOWN), errors.Is(err, unix.ENODEV),
		errors.Is(err, unix.EAFNOSUPPORT), errors.Is(err, unix.EPROTONOSUPPORT),
		errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w (network %s): %w", ErrTemporaryPortUnsupported, network, err)
	default:
		return retryable{err}
	}
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
