package supervisor

import (
	"fmt"
	"strings"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Under --peer-users (Config.PeerLanes) a name resolves within its
// owner's reach: a network, a `uses` entry (wiring.Owned) and a replica
// name of root's are root's, or root's apply is refused naming the owner;
// a caller other than root never takes a name that would be resolved
// later as root's. Without it every caller is root's equal, and so are
// their names.

// PeerLanes says whether --peer-users holds callers other than root to
// lanes of their own (Config.PeerLanes).
func (s *Supervisor) PeerLanes() bool { return s.cfg.PeerLanes }

// ownerOf is the uid that applied w, as names resolve: 0 for every
// workload while callers are root's equals.
func (s *Supervisor) ownerOf(w *workload) uint32 {
	if !s.cfg.PeerLanes {
		return 0
	}
	return w.snapshot(false).AppliedBy
}

// boundLog bounds the log of w, applied by uid by: a confined caller's
// workload keeps its share of the log space (Config.PeerLogBytes),
// root's the daemon's bound.
func (w *workload) boundLog(by uint32) {
	var total int64
	if w.s.cfg.PeerLanes && by != 0 {
		total = w.s.cfg.PeerLogBytes
	}
	w.s.logs.Bound(w.name, total)
}

// networkOwned refuses sp, applied by uid by, a network that holds
// another owner's workload, unless root's document of it opens it to
// peers (`peers: true`): a caller other than root must not make a network
// of the name root's workloads join later, and then meet them there.
// (A confined caller's own rule is checkLane's.)
func (s *Supervisor) networkOwned(sp *spec.Workload, by uint32) error {
	if !s.cfg.PeerLanes || sp.Network == spec.NetworkHost || sp.Network == "" {
		return nil
	}
	if doc := s.net.Doc(sp.Network); doc != nil && doc.Peers {
		return nil
	}
	for _, w := range s.all() {
		if w.name == sp.Name {
			continue
		}
		v := w.snapshot(true) // the spec is shared, never copied
		if v.Spec != nil && v.Spec.Network == sp.Network && v.AppliedBy != by {
			return fmt.Errorf("%w: network %s holds workload %s of uid %d: root's workloads join a network of root's; name another, or remove that workload first", errdefs.ErrForbidden, sp.Network, w.name, v.AppliedBy)
		}
	}
	return nil
}

// replicasOwned refuses group g, applied by uid by, the replica names
// another owner's workloads hold: its replicas are by's, never another's
// workload of that name.
func (s *Supervisor) replicasOwned(g *spec.Workload, by uint32) error {
	if !s.cfg.PeerLanes {
		return nil
	}
	for i := 1; i <= g.Replicas; i++ {
		name := spec.ReplicaName(g.Name, i)
		w, err := s.lookup(name)
		if err != nil || w.group == g.Name {
			continue
		}
		if owner := w.snapshot(false).AppliedBy; owner != by {
			return fmt.Errorf("%w: replica %s of %s: %s is a workload of uid %d, no replica of %s; remove it first, or name the group otherwise", errdefs.ErrConflict, name, g.Name, name, owner, g.Name)
		}
	}
	return nil
}

// replicaNameOf refuses a confined caller (uid by) the name of a replica
// of another owner's workload or group (NAME-i, i from 1 to
// spec.MaxReplicas): that name is the owner's, whenever it scales.
func (s *Supervisor) replicaNameOf(name string, by uint32) error {
	cut := strings.LastIndexByte(name, '-')
	if cut < 1 || spec.ReplicaIndex(name[:cut], name) == 0 {
		return nil
	}
	group := name[:cut]
	for _, w := range s.members(group) {
		if owner := w.snapshot(false).AppliedBy; owner != by {
			return fmt.Errorf("%w: %s is a replica name of %s, a workload of uid %d: it is that owner's whenever it scales", errdefs.ErrForbidden, name, group, owner)
		}
	}
	return nil
}
