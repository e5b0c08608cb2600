package supervisor

import (
	"maps"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/wiring"
)

// wired is the supervisor as package wiring reads it.
type wired struct{ s *Supervisor }

// Lookup finds a workload by name, and a group by its name as its first
// replica: its published ports are the group's, and the plane gives its
// consumers the balanced address.
func (v wired) Lookup(name string) (wiring.Workload, bool) {
	ms := v.s.members(name)
	if len(ms) == 0 {
		return wiring.Workload{}, false
	}
	return wiring.Workload{Spec: ms[0].specNow(), Ports: ms[0].snapshot(false).Ports, AppliedBy: v.s.ownerOf(ms[0])}, true
}

// All is every workload, a group once (as Lookup gives it): its replicas
// share their identity.
func (v wired) All() []wiring.Workload {
	ws := v.s.all()
	out := make([]wiring.Workload, 0, len(ws))
	seen := map[string]bool{}
	for _, w := range ws {
		if w.group != "" {
			if seen[w.group] {
				continue
			}
			seen[w.group] = true
			w = v.s.members(w.group)[0]
		}
		out = append(out, wiring.Workload{Spec: w.specNow(), Ports: w.snapshot(false).Ports, AppliedBy: v.s.ownerOf(w)})
	}
	return out
}

func (v wired) Address(consumer, producer *spec.Workload, m status.PortMapping) (string, error) {
	return v.s.net.Address(consumer, producer, m)
}

func (v wired) OpenToPeers(name, network string) string { return v.s.net.OpenToPeers(name, network) }

// wire is what a workload that the caller of uid by applied is given of
// the others: its spec with its `${endpoint:…}` references resolved
// (wiring.References), and the values
// it is given, its workspace document's configurations, then what its
// `uses` give (wiring.Uses: a producer's own configuration of the same
// name is the more specific). With placeholder, ports not assigned yet
// stand in as long as real ones.
func (s *Supervisor) wire(c *spec.Workload, by uint32, placeholder bool) (resolved *spec.Workload, used map[string]string, err error) {
	if !s.cfg.PeerLanes {
		by = 0 // every caller is root's equal
	}
	if used, err = wiring.Uses(c, by, wired{s}, placeholder); err != nil {
		return nil, nil, err
	}
	if vars := s.workspaces.Vars(c); vars != nil {
		maps.Copy(vars, used)
		used = vars
	}
	resolved, err = wiring.References(c, wired{s}, placeholder)
	return resolved, used, err
}
