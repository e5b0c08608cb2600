package supervisor

import (
	"fmt"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// unsupported refuses the parts of the spec this daemon does not act on
// yet. Accepting them silently would let a user believe a health check,
// limit or ordering protects them when nothing does. Each capability
// deletes its line here when it lands.
func unsupported(w *spec.Workload) error {
	refuse := func(field string) error {
		return fmt.Errorf("%w: %s: not supported by this version of flyd yet", errdefs.ErrNotImplemented, field)
	}
	switch {
	case w.Health != nil:
		return refuse("health")
	}
	return nil
}
