package netplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// Attach declares a workload, applied by by, and reserves its ports in its
// network (made on first use) and its published ports on the host, and
// writes the rules these change: at apply time, so that a conflict is
// refused at once. From then on the workload is a user of its network,
// until it is released from it. A network made for a spec that is then
// refused does not stay behind. The mappings say how each endpoint is
// reached.
func (p *Plane) Attach(ctx context.Context, w *spec.Workload, by uint32) ([]status.PortMapping, error) {
	ports, owed, err := p.Reserve(ctx, w, by)
	if err != nil || !owed {
		return ports, err
	}
	if err := p.Project(); err != nil {
		return nil, err
	}
	return ports, nil
}

// Projections is how many times the rules were projected since the plane
// opened: what an apply's batching saves shows in it.
func (p *Plane) Projections() uint64 { return p.guards.count() }

// Project writes the guards and the declared reach of every workload as
// the declarations, policies and reservations now stand. Callers that ask
// while a projection is under way share the next one.
func (p *Plane) Project() error {
	// Outside mu, so that the applies of a batch share projections.
	return p.writeGuards()
}

// Reserve is Attach without the projection of the rules the workload's
// declaration changes: owed says one is due, and then Project must have
// returned before any run of the workload starts. A batch reserves all of
// a level's workloads and projects once for them, where an Attach each
// would project once per group of applies that happened to wait together.
func (p *Plane) Reserve(ctx context.Context, w *spec.Workload, by uint32) (_ []status.PortMapping, owed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	owed = p.declare(w, by)
	if w.Network != spec.NetworkHost && !p.join(w.Name, w.Network) {
		defer func() {
			if err != nil {
				p.leave(w.Name, w.Network)
				p.dropLocked(w.Network)
			}
		}()
	}
	nw, err := p.Namespace(w.Network)
	if err != nil {
		return nil, false, err
	}
	prior := p.ports.Held(w.Network, w.Name)
	res, err := p.ports.Assign(ctx, w.Network, namespace(nw), w.Name, p.requests(w))
	if err == nil && w.ReplicaOf != "" && w.Network != spec.NetworkHost {
		// The group's own ports in the network, balanced to its replicas'.
		_, err = p.ports.Assign(ctx, w.Network, namespace(nw), w.ReplicaOf, groupRequests(w))
	}
	if err != nil {
		p.dropLocked(w.Network)
		return nil, false, err
	}
	var pub []netalloc.Reservation
	if reqs := p.publishRequests(w); len(reqs) > 0 && (nw.Link == nil || p.fw == nil) {
		p.restoreReservations(ctx, w, nw, prior)
		return nil, false, fmt.Errorf("%w: endpoint %s: publishing needs the network linked to the host (--network-pool) and nf_tables, and this daemon has %s",
			errdefs.ErrRuntimeUnavailable, reqs[0].Endpoint, p.noPublishReason(nw))
	}
	if w.Network != spec.NetworkHost {
		// Published ports are the workload's reservations in the host's
		// table, held by the same rules as a host endpoint's.
		if pub, err = p.ports.Assign(ctx, spec.NetworkHost, nil, holder(w), p.publishRequests(w)); err != nil {
			p.restoreReservations(ctx, w, nw, prior)
			return nil, false, err
		}
	}
	if err := p.WriteRules(w.Network); err != nil {
		return nil, false, err
	}
	p.unquarantine(w.Name)
	// The same declaration with other ports (or a projection that failed
	// last time) is projected again too.
	if !owed && declaredOf(w).ShapesGuards() {
		owed = p.guards.failed() || !slices.Equal(prior, p.ports.Held(w.Network, w.Name))
	}
	return p.mappings(w, res, pub), owed, nil
}

// namespace is nw as netalloc wants it: a nil interface for the host.
func namespace(nw *sandbox.Network) netalloc.Namespace {
	if nw == nil {
		return nil
	}
	return nw
}

// requests turns a spec's endpoints into port requests.
func (p *Plane) requests(w *spec.Workload) []netalloc.Request {
	reqs := make([]netalloc.Request, 0, len(w.Endpoints))
	for _, ep := range w.Endpoints {
		if ep.External() {
			continue // its address is given: nothing to allocate
		}
		r := netalloc.Request{Endpoint: ep.Name}
		switch ep.Port.Mode {
		case spec.PortFixed:
			r.Mode, r.Port = netalloc.ModeFixed, ep.Port.Number
		case spec.PortEphemeral:
			r.Mode = netalloc.ModeEphemeral
		default:
			r.Mode = netalloc.ModeHashed
			r.Port = p.hashedPort(w, ep)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// hashedPort is the codefly hash of an endpoint of w: in codefly's
// container mode for a runtime that says so, so that the same service run
// on the host and in a container at once never collide on a host port.
func (p *Plane) hashedPort(w *spec.Workload, ep spec.Endpoint) int {
	id := w.Identified()
	mode := netalloc.ModeHost
	if p.cfg.ContainerPorts(w.Kind) {
		mode = netalloc.ModeContainer
	}
	// A project is codefly's naming scope, which it hashes in place of
	// the endpoint's name as ENDPOINT-SCOPE (core's RuntimeManager): each
	// copy of a stack has its own hashed ports, the same on every host.
	name := ep.Name
	if w.Project != "" {
		name += "-" + w.Project
	}
	return netalloc.HashedPort(netalloc.HashInput{
		Workspace: id.Workspace, Module: id.Module, Service: id.Service,
		Endpoint: name, API: ep.API, Mode: mode,
	})
}

// noPublishReason says what this daemon lacks to publish a port.
func (p *Plane) noPublishReason(nw *sandbox.Network) string {
	if nw.Link == nil {
		return "no network pool (--network-pool off)"
	}
	return "no nftables (see the daemon's log at start)"
}

// publishRequests are a spec's published endpoints as host port requests.
func (p *Plane) publishRequests(w *spec.Workload) []netalloc.Request {
	var out []netalloc.Request
	for _, r := range p.requests(w) {
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
				r.Port = p.hashedPort(w, ep)
			}
			out = append(out, r)
		}
	}
	return out
}

// restoreReservations undoes an attach whose published ports could not
// be had: the workload's reservations in its network go back to prior.
func (p *Plane) restoreReservations(ctx context.Context, w *spec.Workload, nw *sandbox.Network, prior []netalloc.Reservation) {
	reqs := make([]netalloc.Request, len(prior))
	for i, r := range prior {
		reqs[i] = netalloc.Request{Endpoint: r.Endpoint, Mode: r.Mode, Port: r.Port}
		if r.Mode == netalloc.ModeEphemeral {
			reqs[i].Port = 0
		}
	}
	if _, err := p.ports.Assign(ctx, w.Network, namespace(nw), w.Name, reqs); err != nil {
		p.log.Warn("cannot restore ports after a refused publish", zap.String("workload", w.Name), zap.Error(err))
	}
	if len(prior) == 0 {
		p.dropLocked(w.Network)
	}
}

// mappings publishes reservations as network mappings: how a native
// process, a container and the outside reach each endpoint. Every address
// given is one that reaches the endpoint from where it is read: native
// from the host, container from its own network, public from elsewhere.
func (p *Plane) mappings(w *spec.Workload, res, published []netalloc.Reservation) []status.PortMapping {
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
		port := strconv.Itoa(r.Port)
		// flyd's containers share their network's namespace, so they
		// reach an endpoint on loopback just as its native processes do;
		// a host process reaches an isolated one through its link, or at
		// its published port.
		native, public := "localhost:"+port, ""
		if r.Network == spec.NetworkHost {
			public = port
		} else if hp, ok := hostPort[r.Endpoint]; ok {
			native, public = "localhost:"+strconv.Itoa(hp), strconv.Itoa(hp)
		} else if l := p.Link(r.Network); l != nil {
			native = netip.AddrPortFrom(l.Inner, uint16(r.Port)).String()
		}
		inst := []status.Instance{{Access: "native", Address: native}, {Access: "container", Address: "localhost:" + port}}
		// Only an exposed endpoint is addressed beyond the host.
		if public != "" && exposed[r.Endpoint] && p.cfg.AdvertiseAddress != "" {
			inst = append(inst, status.Instance{Access: "public", Address: p.cfg.AdvertiseAddress + ":" + public})
		}
		out = append(out, status.PortMapping{
			Workload: w.Name, Endpoint: r.Endpoint, API: apis[r.Endpoint], Port: r.Port,
			Published: hostPort[r.Endpoint], Network: r.Network, Instances: inst,
		})
	}
	for _, ep := range w.Endpoints {
		if ep.External() {
			out = append(out, externalMapping(w, ep))
		}
	}
	return out
}

// externalMapping is an external endpoint as its consumers reach it,
// wherever they run: at the address its spec gives (a URL for an
// HTTP-based API).
func externalMapping(w *spec.Workload, ep spec.Endpoint) status.PortMapping {
	addr, _ := spec.ExternalAddress(ep) // valid: the spec was validated
	_, hostPort, _ := strings.Cut(addr, "://")
	if hostPort == "" {
		hostPort = addr
	}
	_, port, _ := net.SplitHostPort(hostPort)
	n, _ := strconv.Atoi(port)
	return status.PortMapping{Workload: w.Name, Endpoint: ep.Name, API: ep.API, Port: n, Network: w.Network,
		Location: spec.LocationExternal, Instances: []status.Instance{{Access: "native", Address: addr}, {Access: "container", Address: addr}}}
}

// Mappings rebuilds a restored workload's mappings from the reservations
// it holds.
func (p *Plane) Mappings(w *spec.Workload) []status.PortMapping {
	byEndpoint := map[string]netalloc.Reservation{}
	for _, r := range p.ports.Held(w.Network, w.Name) {
		byEndpoint[r.Endpoint] = r
	}
	res := make([]netalloc.Reservation, 0, len(w.Endpoints))
	for _, ep := range w.Endpoints {
		if r, ok := byEndpoint[ep.Name]; ok && !ep.External() {
			res = append(res, r)
		}
	}
	var pub []netalloc.Reservation
	if w.Network != spec.NetworkHost {
		pub = p.ports.Held(spec.NetworkHost, holder(w))
	}
	return p.mappings(w, res, pub)
}

// Detach is a workload's way out, the undoing of its Attach: its ports
// are freed, its declaration forgotten and its network dropped when
// nothing else uses it, and the rules follow.
func (p *Plane) Detach(w *spec.Workload) {
	p.Release(w.Name, "")
	p.undeclare(w.Name)
	if w.ReplicaOf != "" && p.groupLeft(w.ReplicaOf) {
		p.Release(w.ReplicaOf, "")
	}
	p.Drop(w.Network)
	if declaredOf(w).ShapesGuards() || len(w.Uses) > 0 {
		p.rewriteGuards()
	}
}

// Release frees a workload's ports in network ("" for every network, and
// quarantine) and takes it out of that network, which it drops when
// nothing uses it any more: for a workload that moved to another network,
// or whose spec is lost.
func (p *Plane) Release(workload, network string) {
	if err := p.ports.Release(workload, network); err != nil {
		p.log.Warn("cannot release ports", zap.String("workload", workload), zap.Error(err))
	}
	p.leave(workload, network)
	if network != "" {
		p.Drop(network)
	}
}

// ReleaseElsewhere frees the ports a workload holds outside network.
func (p *Plane) ReleaseElsewhere(workload, network string) {
	seen := map[string]bool{}
	for _, r := range p.ports.List() {
		if r.Workload == workload && r.Network != network && !seen[r.Network] {
			seen[r.Network] = true
			p.Release(workload, r.Network)
		}
	}
}

// Drop deletes an isolated network no workload uses, and rewrites the
// rules of one still in use: what it serves may have changed.
func (p *Plane) Drop(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(name)
}

func (p *Plane) dropLocked(name string) {
	if name == spec.NetworkHost {
		return
	}
	if len(p.users(name)) > 0 || p.ports.InUse(name) {
		if err := p.WriteRules(name); err != nil {
			p.log.Warn("cannot rewrite a network's rules", zap.String("network", name), zap.Error(err))
		}
		return
	}
	if err := p.nets.DeleteLinked(name, p.Link(name)); err != nil {
		p.log.Warn("cannot delete network", zap.String("network", name), zap.Error(err))
	}
	p.forgetLink(name)
}
