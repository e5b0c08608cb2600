package netalloc

import (
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// Mode says where an endpoint's port number comes from.
type Mode string

const (
	// ModeHashed is a port computed by HashedPort from the identity; the
	// caller passes the number so netalloc need not know identities.
	ModeHashed Mode = "hashed"
	// ModeFixed is the number written in the spec.
	ModeFixed Mode = "fixed"
	// ModeEphemeral is a port the kernel picks in the workload's network.
	ModeEphemeral Mode = "ephemeral"
)

// Request asks for one endpoint's port.
type Request struct {
	Endpoint string
	Mode     Mode
	// Port is the number for hashed and fixed requests and 0 for
	// ephemeral ones.
	Port int
}

// Reservation is a port held by one endpoint of one workload in one
// network. It is also the on-disk form, so its JSON names are stable.
type Reservation struct {
	Network  string `json:"network"`
	Port     int    `json:"port"`
	Workload string `json:"workload"`
	Endpoint string `json:"endpoint"`
	Mode     Mode   `json:"mode"`
}

func checkNetwork(network string) error {
	// Network names become file names: nothing else may reach the table
	// directory.
	if !dnslabel.ValidFull(network) {
		return fmt.Errorf("%w: network name %q", errdefs.ErrInvalid, network)
	}
	return nil
}

func checkHolder(workload, endpoint string) error {
	if workload == "" {
		return fmt.Errorf("%w: empty workload name", errdefs.ErrInvalid)
	}
	// Workload names become file names too.
	if !dnslabel.ValidFull(workload) {
		return fmt.Errorf("%w: workload name %q", errdefs.ErrInvalid, workload)
	}
	if endpoint == "" {
		return fmt.Errorf("%w: workload %s: empty endpoint name", errdefs.ErrInvalid, workload)
	}
	return nil
}

func (r Request) check(workload string) error {
	if err := checkHolder(workload, r.Endpoint); err != nil {
		return err
	}
	switch r.Mode {
	case ModeHashed, ModeFixed:
		if r.Port < 1 || r.Port > 65535 {
			return fmt.Errorf("%w: endpoint %s: %s port %d outside 1..65535", errdefs.ErrInvalid, r.Endpoint, r.Mode, r.Port)
		}
	case ModeEphemeral:
		// A number here means the caller confused modes; taking it
		// silently would hand out a port nobody asked for.
		if r.Port != 0 {
			return fmt.Errorf("%w: endpoint %s: ephemeral request with port %d", errdefs.ErrInvalid, r.Endpoint, r.Port)
		}
	default:
		return fmt.Errorf("%w: endpoint %s: unknown port mode %q", errdefs.ErrInvalid, r.Endpoint, r.Mode)
	}
	return nil
}

// keeps reports whether r is already satisfied by prior, so the endpoint
// keeps its port without a probe: its own process may be listening on it.
func (r Request) keeps(prior Reservation) bool {
	if r.Mode == ModeEphemeral {
		return prior.Mode == ModeEphemeral
	}
	return prior.Mode != ModeEphemeral && prior.Port == r.Port
}
