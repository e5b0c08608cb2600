package supervisor

import (
	"context"

	"github.com/flyd-dev/flyd/status"
)

// Reach lists each endpoint's derived allow-list, of one workload's
// endpoints when name is not "".
func (s *Supervisor) Reach(ctx context.Context, name string) ([]status.ReachEndpoint, error) {
	if name != "" {
		if _, err := s.lookup(name); err != nil {
			return nil, err
		}
	}
	return s.net.Reach(name), nil
}
