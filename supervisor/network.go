package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// network opens the namespace of a workload's network, creating it on
// first use, linked to the host when the daemon has a network pool; nil
// for the host.
func (s *Supervisor) network(name string) (*sandbox.Network, error) {
	if name == spec.NetworkHost {
		return nil, nil
	}
	nw, err := s.nets.Ensure(name)
	if err != nil || !s.cfg.NetworkPool.IsValid() {
		return nw, err
	}
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	if l := s.links[name]; l != nil {
		nw.Link = l
		return nw, nil
	}
	l, err := s.nets.Connect(nw, s.cfg.NetworkPool)
	if err != nil {
		return nil, err
	}
	if err := s.allowNetwork(name, l); err != nil {
		return nil, err
	}
	s.links[name] = l
	nw.Link = l
	return nw, nil
}

// allowNetwork writes a linked network's rules: its way out through the
// host, and nothing to other networks.
func (s *Supervisor) allowNetwork(name string, l *sandbox.Link) error {
	if s.cfg.Firewall == nil {
		return nil
	}
	if changed, err := firewall.Forwarding(); err != nil {
		return err
	} else if changed {
		s.log.Info("turned on IPv4 forwarding (net.ipv4.ip_forward=1): a network's traffic goes out through the host")
	}
	if err := s.cfg.Firewall.Set(name, s.rulesOf(name, l)); err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	return nil
}

// forgetLink drops a deleted network's link and rules.
func (s *Supervisor) forgetLink(name string) {
	s.linkMu.Lock()
	delete(s.links, name)
	s.linkMu.Unlock()
	if s.cfg.Firewall != nil {
		if err := s.cfg.Firewall.Remove(name); err != nil {
			s.log.Warn("cannot remove a network's rules", zap.String("network", name), zap.Error(err))
		}
		s.rewriteGuards()
	}
}

// rewriteGuards puts the policies in force again after a change that
// cannot fail for it (a network or workload gone), saying so if it does.
func (s *Supervisor) rewriteGuards() {
	if err := s.writeGuards(); err != nil {
		s.log.Warn("cannot put the policies in force", zap.Error(err))
	}
}

// syncLinks, at start, learns the links of the networks that are left and
// rewrites the firewall for exactly those, replacing what a crash left.
func (s *Supervisor) syncLinks() {
	if err := s.nets.SweepLinks(); err != nil {
		s.log.Warn("cannot sweep network links", zap.Error(err))
	}
	links, err := s.nets.Links()
	if err != nil {
		s.log.Warn("cannot list network links", zap.Error(err))
		return
	}
	nets := map[string]firewall.Net{}
	s.linkMu.Lock()
	for name, l := range links {
		if !l.Subnet.IsValid() {
			continue // half made: the next Ensure of the network remakes it
		}
		s.links[name] = l
		nets[name] = s.rulesOf(name, l)
	}
	s.linkMu.Unlock()
	if s.cfg.Firewall == nil {
		return
	}
	if err := s.cfg.Firewall.Sync(nets); err != nil {
		s.log.Warn("cannot write the networks' rules", zap.Error(err))
	}
}

// namespace is nw as netalloc wants it: a nil interface for the host.
func namespace(nw *sandbox.Network) netalloc.Namespace {
	if nw == nil {
		return nil
	}
	return nw
}

// requests turns a spec's endpoints into port requests.
func (s *Supervisor) requests(w *spec.Workload) []netalloc.Request {
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
			r.Port = s.hashedPort(w, ep)
		}
		reqs[i] = r
	}
	return reqs
}

// assign reserves a spec's ports in its network, at apply time so that a
// conflict is refused synchronously. A network created for a spec that is
// then refused does not stay behind.
func (s *Supervisor) assign(ctx context.Context, w *spec.Workload) ([]status.PortMapping, error) {
	ports, reproject, err := s.assignPorts(ctx, w)
	if err != nil || !reproject {
		return ports, err
	}
	// Outside netMu, so that the applies of a batch share projections.
	if err := s.writeGuards(); err != nil {
		return nil, err
	}
	return ports, nil
}

func (s *Supervisor) assignPorts(ctx context.Context, w *spec.Workload) (_ []status.PortMapping, reproject bool, _ error) {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	reproject = s.declare(w)
	nw, err := s.network(w.Network)
	if err != nil {
		return nil, false, err
	}
	prior := s.ports.Held(w.Network, w.Name)
	res, err := s.ports.Assign(ctx, w.Network, namespace(nw), w.Name, s.requests(w))
	if err != nil {
		s.dropNetworkLocked(w.Network)
		return nil, false, err
	}
	var pub []netalloc.Reservation
	if reqs := s.publishRequests(w); len(reqs) > 0 && (nw.Link == nil || s.cfg.Firewall == nil) {
		s.restoreReservations(ctx, w, nw, prior)
		return nil, false, fmt.Errorf("%w: endpoint %s: publishing needs the network linked to the host (--network-pool) and nf_tables, and this daemon has %s",
			errdefs.ErrRuntimeUnavailable, reqs[0].Endpoint, s.noPublishReason(nw))
	}
	if w.Network != spec.NetworkHost {
		// Published ports are the workload's reservations in the host's
		// table, held by the same rules as a host endpoint's.
		if pub, err = s.ports.Assign(ctx, spec.NetworkHost, nil, w.Name, s.publishRequests(w)); err != nil {
			s.restoreReservations(ctx, w, nw, prior)
			return nil, false, err
		}
	}
	if err := s.writeRules(w.Network); err != nil {
		return nil, false, err
	}
	// The same declaration with other ports (or a projection that failed
	// last time) is projected again too.
	if !reproject && declaredOf(w).ShapesGuards() {
		reproject = s.guards.failed() || !slices.Equal(prior, s.ports.Held(w.Network, w.Name))
	}
	return s.mappings(w, res, pub), reproject, nil
}

// hashedPort is the codefly hash of an endpoint of w: in codefly's
// container mode for a runtime that says so (driver.Capabilities), so that
// the same service run on the host and in a container at once never
// collide on a host port.
func (s *Supervisor) hashedPort(w *spec.Workload, ep spec.Endpoint) int {
	id := identity(w)
	mode := netalloc.ModeHost
	if s.caps(w.Kind).ContainerPorts {
		mode = netalloc.ModeContainer
	}
	return netalloc.HashedPort(netalloc.HashInput{
		Workspace: id.Workspace, Module: id.Module, Service: id.Service,
		Endpoint: ep.Name, API: ep.API, Mode: mode,
	})
}

// noPublishReason says what this daemon lacks to publish a port.
func (s *Supervisor) noPublishReason(nw *sandbox.Network) string {
	if nw.Link == nil {
		return "no network pool (--network-pool off)"
	}
	return "no nftables (see the daemon's log at start)"
}

// publishRequests are a spec's published endpoints as host port requests.
func (s *Supervisor) publishRequests(w *spec.Workload) []netalloc.Request {
	var out []netalloc.Request
	for _, r := range s.requests(w) {
		for _, ep := range w.Endpoints {
			if ep.Name != r.Endpoint || ep.Publish.Mode == "" {
				continue
			}
			switch ep.Publish.Mode {
			case spec.PortFixed:
				r.Mode, r.Port = netalloc.ModeFixed, ep.Publish.Number
			case spec.PortEphemeral:
				r.Mode, r.Port = netalloc.ModeEphemeral, 0
			default:
				// The hashed port of the endpoint's identity, which its
				// request computed: the stable port tools connect to.
				r.Mode = netalloc.ModeHashed
				r.Port = s.hashedPort(w, ep)
			}
			out = append(out, r)
		}
	}
	return out
}

// restoreReservations undoes an assign whose published ports could not
// be had: the workload's reservations in its network go back to prior.
func (s *Supervisor) restoreReservations(ctx context.Context, w *spec.Workload, nw *sandbox.Network, prior []netalloc.Reservation) {
	reqs := make([]netalloc.Request, len(prior))
	for i, r := range prior {
		reqs[i] = netalloc.Request{Endpoint: r.Endpoint, Mode: r.Mode, Port: r.Port}
		if r.Mode == netalloc.ModeEphemeral {
			reqs[i].Port = 0
		}
	}
	if _, err := s.ports.Assign(ctx, w.Network, namespace(nw), w.Name, reqs); err != nil {
		s.log.Warn("cannot restore ports after a refused publish", zap.String("workload", w.Name), zap.Error(err))
	}
	if len(prior) == 0 {
		s.dropNetworkLocked(w.Network)
	}
}

// writeRules rewrites a linked network's rules from what its workloads
// hold: their published ports, and the ports they serve.
func (s *Supervisor) writeRules(network string) error {
	l := s.linkOf(network)
	if l == nil || s.cfg.Firewall == nil {
		return nil
	}
	if err := s.cfg.Firewall.Set(network, s.rulesOf(network, l)); err != nil {
		return fmt.Errorf("network %s: %w", network, err)
	}
	return nil
}

// publishedIn lists a network's published ports, by host port.
func (s *Supervisor) publishedIn(network string) []status.Published {
	inner := map[[2]string]int{}
	for _, r := range s.ports.In(network) {
		inner[[2]string{r.Workload, r.Endpoint}] = r.Port
	}
	var out []status.Published
	for _, r := range s.ports.In(spec.NetworkHost) {
		if p, ok := inner[[2]string{r.Workload, r.Endpoint}]; ok {
			out = append(out, status.Published{HostPort: r.Port, Port: p, Workload: r.Workload, Endpoint: r.Endpoint})
		}
	}
	slices.SortFunc(out, func(a, b status.Published) int { return a.HostPort - b.HostPort })
	return out
}

// rulesOf is a network as the firewall sees it.
func (s *Supervisor) rulesOf(network string, l *sandbox.Link) firewall.Net {
	n := firewall.Net{Link: l.Name, Subnet: l.Subnet, Inner: l.Inner, Egress: s.netDoc(network).AllowsEgress(),
		NS: filepath.Join(s.nets.Dir(), network)}
	for _, r := range s.ports.In(network) {
		n.Served = append(n.Served, r.Port)
	}
	for _, p := range s.publishedIn(network) {
		n.Published = append(n.Published, firewall.Forward{HostPort: p.HostPort, Port: p.Port, Exposed: s.exposed(p.Workload, p.Endpoint)})
	}
	return n
}

// mappings publishes reservations as network mappings: how a native
// process, a container and the outside reach each endpoint.
// Every address given is one that reaches the endpoint from where it is
// read: native from the host, container from its own network, public from
// elsewhere.
func (s *Supervisor) mappings(w *spec.Workload, res, published []netalloc.Reservation) []status.PortMapping {
	apis, exposed := map[string]string{}, map[string]bool{}
	for _, ep := range w.Endpoints {
		apis[ep.Name], exposed[ep.Name] = ep.API, ep.Exposed()
	}
	hostPort := map[string]int{}
	for _, r := range published {
		hostPort[r.Endpoint] = r.Port
	}
	out := make([]status.PortMapping, 0, len(res))
	for _, r := range res {
		p := strconv.Itoa(r.Port)
		// flyd's containers share their network's namespace, so they
		// reach an endpoint on loopback just as its native processes do;
		// a host process reaches an isolated one through its link, or at
		// its published port.
		native, public := "localhost:"+p, ""
		if r.Network == spec.NetworkHost {
			public = p
		} else if hp, ok := hostPort[r.Endpoint]; ok {
			native, public = "localhost:"+strconv.Itoa(hp), strconv.Itoa(hp)
		} else if l := s.linkOf(r.Network); l != nil {
			native = netip.AddrPortFrom(l.Inner, uint16(r.Port)).String()
		}
		inst := []status.Instance{{Access: "native", Address: native}, {Access: "container", Address: "localhost:" + p}}
		// Only an exposed endpoint is addressed beyond the host.
		if public != "" && exposed[r.Endpoint] && s.cfg.AdvertiseAddress != "" {
			inst = append(inst, status.Instance{Access: "public", Address: s.cfg.AdvertiseAddress + ":" + public})
		}
		out = append(out, status.PortMapping{
			Workload: w.Name, Endpoint: r.Endpoint, API: apis[r.Endpoint], Port: r.Port,
			Published: hostPort[r.Endpoint], Network: r.Network, Instances: inst,
		})
	}
	return out
}

// linkOf is an isolated network's link, nil for the host or an island.
func (s *Supervisor) linkOf(network string) *sandbox.Link {
	if network == spec.NetworkHost {
		return nil
	}
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.links[network]
}

// reservedMappings rebuilds a restored workload's mappings from the
// persisted tables.
func (s *Supervisor) reservedMappings(w *spec.Workload) []status.PortMapping {
	byEndpoint := map[string]netalloc.Reservation{}
	for _, r := range s.ports.Held(w.Network, w.Name) {
		byEndpoint[r.Endpoint] = r
	}
	res := make([]netalloc.Reservation, 0, len(w.Endpoints))
	for _, ep := range w.Endpoints {
		if r, ok := byEndpoint[ep.Name]; ok {
			res = append(res, r)
		}
	}
	var pub []netalloc.Reservation
	if w.Network != spec.NetworkHost {
		pub = s.ports.Held(spec.NetworkHost, w.Name)
	}
	return s.mappings(w, res, pub)
}

// release frees a workload's ports in network ("" for every network)
// and drops that network when nothing uses it any more.
func (s *Supervisor) release(workload, network string) {
	if err := s.ports.Release(workload, network); err != nil {
		s.log.Warn("cannot release ports", zap.String("workload", workload), zap.Error(err))
	}
	if network != "" {
		s.dropNetwork(network)
		return
	}
	s.undeclare(workload) // gone whole
}

func (s *Supervisor) dropNetwork(name string) {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	s.dropNetworkLocked(name)
}

// dropNetworkLocked deletes an isolated network no workload uses, and
// rewrites the rules of one still in use: what it serves may have changed.
func (s *Supervisor) dropNetworkLocked(name string) {
	if name == spec.NetworkHost {
		return
	}
	if len(s.networkUsers(name)) > 0 || s.ports.InUse(name) {
		if err := s.writeRules(name); err != nil {
			s.log.Warn("cannot rewrite a network's rules", zap.String("network", name), zap.Error(err))
		}
		return
	}
	if err := s.nets.Delete(name); err != nil {
		s.log.Warn("cannot delete network", zap.String("network", name), zap.Error(err))
	}
	s.forgetLink(name)
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
		rec, ok := specs[r.Workload]
		publishes := ok && r.Network == spec.NetworkHost && len(s.publishRequests(rec.Spec)) > 0
		if !kept[r.Workload] || ok && rec.Spec.Network != r.Network && !publishes {
			_ = s.ports.Release(r.Workload, r.Network)
		}
	}
}

// portList lists every endpoint's mapping.
func (s *Supervisor) portList() []status.PortMapping {
	var out []status.PortMapping
	for _, w := range s.all() {
		out = append(out, w.snapshot(false).Ports...)
	}
	return out
}

// networkList lists the isolated networks and who uses them.
func (s *Supervisor) networkList() ([]status.Network, error) {
	names, err := s.nets.List()
	if err != nil {
		return nil, err
	}
	out := make([]status.Network, 0, len(names))
	for _, n := range names {
		nw, err := s.nets.Open(n)
		if err != nil {
			continue
		}
		users := s.networkUsers(n)
		sort.Strings(users)
		an := status.Network{Name: n, Path: nw.Path, Workloads: users}
		if l := s.linkOf(n); l != nil {
			an.Link, an.Address, an.Gateway = l.Name, l.Inner.String(), l.Host.String()
			an.Egress = s.cfg.Firewall != nil && s.netDoc(n).AllowsEgress()
			an.Published = s.publishedIn(n)
		}
		out = append(out, an)
	}
	// A document of a network that has no namespace (none of its
	// workloads runs yet, or any more) is listed too, with its settings.
	for n, doc := range s.networkDocs() {
		if !slices.Contains(names, n) {
			out = append(out, status.Network{Name: n, Workloads: []string{}, Egress: doc.AllowsEgress()})
		}
	}
	slices.SortFunc(out, func(a, b status.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteNetwork deletes an isolated network that no workload uses.
func (s *Supervisor) DeleteNetwork(ctx context.Context, name string) error {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	if err := s.docOwnedBy(spec.KindNetwork, name, "", false); err != nil {
		return err
	}
	if users := s.networkUsers(name); len(users) > 0 {
		return fmt.Errorf("%w: network %s is used by %s", errdefs.ErrConflict, name, strings.Join(users, ", "))
	}
	// The document goes whether or not the namespace is there: a network
	// whose last workload went has none, and its settings must not linger
	// for a later network of that name.
	doc := s.netDoc(name) != nil
	if _, err := s.nets.Open(name); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && doc {
			s.forgetNetDoc(name)
			s.publish(status.Event{Type: status.EventNetwork, Message: "network " + name + " removed"})
			return nil
		}
		return err
	}
	if err := s.nets.Delete(name); err != nil {
		return err
	}
	s.forgetLink(name)
	s.forgetNetDoc(name)
	s.publish(status.Event{Type: status.EventNetwork, Message: "network " + name + " removed"})
	return nil
}
