package supervisor

import (
	"context"
	"fmt"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// A caller other than root that --peer-users holds to its own lane
// (ApplyOptions.Confined) acts only on the workloads it applied (authz
// decides that), puts them only in networks that hold its own workloads
// alone or that root opened to peers (a network document's `peers:
// true`), and holds a share of the ports. What its specs may say (kind,
// user, ports below the unprivileged start, identity) is the daemon's
// spec policy; this is what depends on what runs already.

// maxPeerPorts bounds the ports the workloads of one confined caller hold
// in all, endpoints and published ports alike: the port space is shared
// with root.
const maxPeerPorts = 256

// checkLane refuses a confined caller's spec that would leave its lane: a
// network of others, or more ports than its share.
func (s *Supervisor) checkLane(sp *spec.Workload, by uint32) error {
	var doc *spec.Network
	if sp.Network != spec.NetworkHost {
		doc = s.net.Doc(sp.Network)
		if doc != nil && !doc.Peers {
			return fmt.Errorf("%w: network %s is root's, and its document does not open it to callers other than root (peers: true)", errdefs.ErrForbidden, sp.Network)
		}
	}
	held := 0
	for _, w := range s.all() {
		if w.name == sp.Name {
			continue
		}
		v := w.snapshot(true) // the spec is shared, never copied
		if v.AppliedBy == by {
			held += portsHeld(v.Ports)
		}
		if doc == nil && sp.Network != spec.NetworkHost && v.Spec != nil && v.Spec.Network == sp.Network && v.AppliedBy != by {
			return fmt.Errorf("%w: network %s holds workload %s of uid %d: a caller other than root uses a network of its own, or one root opened to peers (peers: true)", errdefs.ErrForbidden, sp.Network, w.name, v.AppliedBy)
		}
	}
	need := len(sp.Endpoints)
	for _, e := range sp.Endpoints {
		if e.Publish != (spec.Port{}) {
			need++
		}
	}
	if held+need > maxPeerPorts {
		return fmt.Errorf("%w: uid %d's workloads hold %d ports, and %s asks %d more: a caller other than root holds at most %d", errdefs.ErrForbidden, by, held, sp.Name, need, maxPeerPorts)
	}
	return nil
}

// portsHeld counts the ports a workload's mappings hold as checkLane counts
// what a spec asks: one an endpoint, and one more for an endpoint that is
// published on the host.
func portsHeld(ports []status.PortMapping) int {
	n := 0
	for _, m := range ports {
		n++
		if m.Published != 0 {
			n++
		}
	}
	return n
}

// mayAct refuses the caller of ctx a command to w, from its view: for
// what must be refused before the workload's loop is asked (a stop's
// killNow); the loop checks again, as it acts.
func mayAct(ctx context.Context, w *workload) error {
	return authz.Decide(authz.CallerOf(ctx), authz.Act, w.viewDoc())
}

// doc is the workload as authz judges it, as its loop knows it: on the
// loop only.
func (w *workload) doc() authz.Doc {
	return authz.Doc{Name: w.name, Exists: true, AppliedBy: w.by, Owner: w.owner}
}

// viewDoc is the workload as authz judges it, from its view.
func (w *workload) viewDoc() authz.Doc {
	v := w.snapshot(false)
	return authz.Doc{Name: w.name, Exists: true, AppliedBy: v.AppliedBy, Owner: v.Owner}
}
