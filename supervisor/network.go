package supervisor

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// network opens the namespace of a workload's network, creating it on
// first use; nil for the host.
func (s *Supervisor) network(name string) (*sandbox.Network, error) {
	if name == spec.NetworkHost {
		return nil, nil
	}
	return s.nets.Ensure(name)
}

// namespace is nw as netalloc wants it: a nil interface for the host.
func namespace(nw *sandbox.Network) netalloc.Namespace {
	if nw == nil {
		return nil
	}
	return nw
}

// requests turns a spec's endpoints into port requests.
func requests(w *spec.Workload) []netalloc.Request {
	id := identity(w)
	reqs := make([]netalloc.Request, len(w.Endpoints))
	for i, ep := range w.Endpoints {
		r := netalloc.Request{Endpoint: ep.Name}
		switch ep.Port.Mode {
		case spec.PortFixed:
			r.Mode, r.Port = netalloc.ModeFixed, ep.Port.Number
		case spec.PortEphemeral:
			r.Mode = netalloc.ModeEphemeral
		default:
			r.Mode = netalloc.ModeHashed
			r.Port = netalloc.HashedPort(netalloc.HashInput{
				Workspace: id.Workspace, Module: id.Module, Service: id.Service,
				Endpoint: ep.Name, API: ep.API,
			})
		}
		reqs[i] = r
	}
	return reqs
}

// assign reserves a spec's ports in its network, at apply time so that a
// conflict is refused synchronously. A network created for a spec that is
// then refused does not stay behind.
func (s *Supervisor) assign(ctx context.Context, w *spec.Workload) ([]api.PortMapping, error) {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	nw, err := s.network(w.Network)
	if err != nil {
		return nil, err
	}
	res, err := s.ports.Assign(ctx, w.Network, namespace(nw), w.Name, requests(w))
	if err != nil {
		s.dropNetworkLocked(w.Network)
		return nil, err
	}
	return s.mappings(w, res), nil
}

// mappings publishes reservations as network mappings: how a native
// process, a container and the outside reach each endpoint.
func (s *Supervisor) mappings(w *spec.Workload, res []netalloc.Reservation) []api.PortMapping {
	apis := map[string]string{}
	for _, ep := range w.Endpoints {
		apis[ep.Name] = ep.API
	}
	out := make([]api.PortMapping, 0, len(res))
	for _, r := range res {
		p := strconv.Itoa(r.Port)
		// flyd's containers share their network's namespace, so they
		// reach an endpoint on loopback just as native processes do.
		inst := []api.Instance{{Access: "native", Address: "localhost:" + p}, {Access: "container", Address: "localhost:" + p}}
		if r.Network == spec.NetworkHost && s.cfg.AdvertiseAddress != "" {
			inst = append(inst, api.Instance{Access: "public", Address: s.cfg.AdvertiseAddress + ":" + p})
		}
		out = append(out, api.PortMapping{
			Workload: w.Name, Endpoint: r.Endpoint, API: apis[r.Endpoint], Port: r.Port,
			Network: r.Network, Instances: inst,
		})
	}
	return out
}

// reservedMappings rebuilds a restored workload's mappings from the
// persisted tables.
func (s *Supervisor) reservedMappings(w *spec.Workload) []api.PortMapping {
	byEndpoint := map[string]netalloc.Reservation{}
	for _, r := range s.ports.List() {
		if r.Workload == w.Name && r.Network == w.Network {
			byEndpoint[r.Endpoint] = r
		}
	}
	res := make([]netalloc.Reservation, 0, len(w.Endpoints))
	for _, ep := range w.Endpoints {
		if r, ok := byEndpoint[ep.Name]; ok {
			res = append(res, r)
		}
	}
	return s.mappings(w, res)
}

// release frees a workload's ports in network ("" for every network)
// and drops that network when nothing uses it any more.
func (s *Supervisor) release(workload, network string) {
	if err := s.ports.Release(workload, network); err != nil {
		s.log.Warn("cannot release ports", zap.String("workload", workload), zap.Error(err))
	}
	if network != "" {
		s.dropNetwork(network)
	}
}

func (s *Supervisor) dropNetwork(name string) {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	s.dropNetworkLocked(name)
}

// dropNetworkLocked deletes an isolated network no workload uses.
func (s *Supervisor) dropNetworkLocked(name string) {
	if name == spec.NetworkHost || len(s.networkUsers(name)) > 0 || s.ports.InUse(name) {
		return
	}
	if err := s.nets.Delete(name); err != nil {
		s.log.Warn("cannot delete network", zap.String("network", name), zap.Error(err))
	}
}

// networkUsers names the workloads in a network, quarantined ones too.
func (s *Supervisor) networkUsers(name string) []string {
	var users []string
	for _, w := range s.all() {
		if w.networkName() == name {
			users = append(users, w.name)
		}
	}
	return append(users, s.quarantinedIn(name)...)
}

// sweepNetworks deletes the isolated networks no spec names and the port
// reservations of workloads that no longer exist. A quarantined name keeps
// its reservations and its network, or every network while its record
// does not say which one its run is in.
func (s *Supervisor) sweepNetworks(specs map[string]specRecord) {
	used := map[string]bool{}
	for _, r := range specs {
		used[r.Spec.Network] = true
	}
	kept := s.kept(specs)
	names, err := s.nets.List()
	if err != nil {
		s.log.Warn("cannot list networks", zap.Error(err))
	}
	for _, n := range names {
		if !used[n] && len(s.quarantinedIn(n)) == 0 {
			s.log.Info("deleting a network no spec uses", zap.String("network", n))
			if err := s.nets.Delete(n); err != nil {
				s.log.Warn("cannot delete network", zap.String("network", n), zap.Error(err))
			}
		}
	}
	for _, r := range s.ports.List() {
		if rec, ok := specs[r.Workload]; !kept[r.Workload] || ok && rec.Spec.Network != r.Network {
			_ = s.ports.Release(r.Workload, r.Network)
		}
	}
}

// Ports lists every endpoint's mapping.
func (s *Supervisor) Ports(ctx context.Context) ([]api.PortMapping, error) {
	var out []api.PortMapping
	for _, w := range s.all() {
		out = append(out, w.snapshot(false).Ports...)
	}
	return out, nil
}

// Networks lists the isolated networks and who uses them.
func (s *Supervisor) Networks(ctx context.Context) ([]api.Network, error) {
	names, err := s.nets.List()
	if err != nil {
		return nil, err
	}
	out := make([]api.Network, 0, len(names))
	for _, n := range names {
		nw, err := s.nets.Open(n)
		if err != nil {
			continue
		}
		users := s.networkUsers(n)
		sort.Strings(users)
		out = append(out, api.Network{Name: n, Path: nw.Path, Workloads: users})
	}
	return out, nil
}

// DeleteNetwork deletes an isolated network that no workload uses.
func (s *Supervisor) DeleteNetwork(ctx context.Context, name string) error {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	if _, err := s.nets.Open(name); err != nil {
		return err
	}
	if users := s.networkUsers(name); len(users) > 0 {
		return fmt.Errorf("%w: network %s is used by %s", errdefs.ErrConflict, name, strings.Join(users, ", "))
	}
	return s.nets.Delete(name)
}
