package sandbox

import (
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// HostNetwork names the host's own network namespace. It is what a spec
// means by `network: host` (spec.NetworkHost), so no isolated network may
// take the name.
const HostNetwork = "host"

// ValidateName reports, wrapping errdefs.ErrInvalid, why name cannot name an
// isolated network.
func ValidateName(name string) error {
	if name == HostNetwork {
		return fmt.Errorf("network %q is the host's own network and cannot be created or deleted: %w", name, errdefs.ErrInvalid)
	}
	if !dnslabel.ValidFull(name) {
		shown := name
		if len(shown) > 70 { // the name is the user's; the message need not echo a megabyte of it
			shown = shown[:64] + "..."
		}
		return fmt.Errorf("network name %q must be %s: %w", shown, dnslabel.FullRule, errdefs.ErrInvalid)
	}
	return nil
}
