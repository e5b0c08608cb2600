// Package wiring is what a workload is given of the others: the values of
// the endpoints its `uses` name, the producers' configurations, and the
// addresses its `${endpoint:…}` references resolve to, under codefly's
// names and by seed 000's rules; and what a run is given in all, its
// command and its environment (PlanRun). It keeps nothing and makes
// nothing: it reads the workloads and their ports through World, and asks
// the network plane (World.Address) for the value that reaches an endpoint
// from where the consumer runs.
package wiring

import (
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Workload is what wiring reads of a workload: its spec, secrets
// included, its ports, and who applied it.
type Workload struct {
	Spec  *spec.Workload
	Ports []status.PortMapping
	// AppliedBy is the uid of the caller that applied it; 0 for root.
	AppliedBy uint32
}

// World is what wiring reads of the daemon.
type World interface {
	// Lookup is the workload of a full name.
	Lookup(name string) (Workload, bool)
	// All is every workload.
	All() []Workload
	// Address is what consumer is given of producer's endpoint m, from
	// where it runs (netplane.Plane.Address).
	Address(consumer, producer *spec.Workload, m status.PortMapping) (string, error)
	// OpenToPeers names the policy by which root opened the workload of a
	// full name, in network, to the consumers that callers other than
	// root applied (an ingress rule's `from: {users: true, peers:
	// true}`); "" when none does.
	OpenToPeers(name, network string) string
}
