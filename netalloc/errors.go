package netalloc

import (
	"errors"
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
)

var (
	// ErrTemporaryPortUnsupported means the network cannot bind loopback
	// at all; retrying will not help, the host or namespace needs fixing.
	ErrTemporaryPortUnsupported = errors.New("temporary ports unsupported: loopback cannot be bound")
	// ErrTemporaryPortUnavailable means every bounded attempt failed for a
	// transient reason; it wraps the last one. Retrying later may work.
	ErrTemporaryPortUnavailable = errors.New("no temporary port available")
)

// errCollision is a kernel-chosen port that the table already holds: the
// kernel only knows bound sockets, the table also knows ports whose
// workload is not listening right now.
var errCollision = errors.New("kernel chose a port reserved in the table")

// PortInUseError is a refused port. It wraps errdefs.ErrPortInUse so that
// the API maps it like any other kind, while callers that want to show the
// holder can read it with errors.As.
type PortInUseError struct {
	Network string
	Port    int
	// Workload and Endpoint name the holder when flyd holds the port.
	Workload string
	Endpoint string
	// PID and Program name a holder flyd does not manage, when /proc tells.
	PID     int
	Program string
	// Hashed: the refused request and the holder's reservation are both
	// hashed ports, two endpoints whose hashes meet, which only a port of
	// another mode for one of them settles.
	Hashed bool
}

func (e *PortInUseError) Error() string {
	head := fmt.Sprintf("port %d in network %s", e.Port, e.Network)
	switch {
	case e.Workload != "" && e.Hashed:
		return fmt.Sprintf("%s is held by workload %s (endpoint %s), whose hashed port is the same: give one of them a port number or ephemeral", head, e.Workload, e.Endpoint)
	case e.Workload != "":
		return fmt.Sprintf("%s is held by workload %s (endpoint %s)", head, e.Workload, e.Endpoint)
	case e.PID > 0 && e.Program != "":
		return fmt.Sprintf("%s is in use by pid %d (%s)", head, e.PID, e.Program)
	case e.PID > 0:
		return fmt.Sprintf("%s is in use by pid %d", head, e.PID)
	default:
		return head + " is in use"
	}
}

func (e *PortInUseError) Unwrap() error { return errdefs.ErrPortInUse }

func heldBy(r Reservation) *PortInUseError {
	return &PortInUseError{Network: r.Network, Port: r.Port, Workload: r.Workload, Endpoint: r.Endpoint}
}

// retryable marks a failure that another attempt may not meet: a full
// descriptor table, a collision, a probe that would not close.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}
