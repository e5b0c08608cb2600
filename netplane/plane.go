package netplane

import (
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/connectmap"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// DocStore keeps documents durably, one record (JSON) a document: the
// daemon's desired-state journal, which holds its workloads too.
type DocStore interface {
	// Docs are the records of a kind's documents at open, by name.
	Docs(kind string) map[string][]byte
	// PutDoc records one, durably; a nil record removes it.
	PutDoc(kind, name string, record []byte) error
}

// Config is what a plane is built from.
type Config struct {
	// Store keeps the network and policy documents (desired state);
	// StateDir is where an older daemon kept them, whole-file, to be
	// moved into Store; RunDir the namespaces and port reservations
	// (gone after a reboot).
	Store            DocStore
	StateDir, RunDir string
	// Pool is where isolated networks' links take their /30s; the zero
	// prefix leaves networks islands with only loopback. Firewall writes
	// their way out, the policies and the visibilities; nil writes none.
	Pool     netip.Prefix
	Firewall *firewall.Firewall
	// AdvertiseAddress is the address other hosts reach host-network
	// endpoints on; empty publishes no public instance.
	AdvertiseAddress string
	Logger           *zap.Logger
	// ContainerPorts says whether a runtime's endpoints hash in codefly's
	// container mode (driver.Capabilities).
	ContainerPorts func(spec.Kind) bool
	// Cgroups tells the workloads' sockets apart for declared reach;
	// HostReach puts the host's network under it; Event reports what it
	// refuses.
	Cgroups   *sandbox.Cgroups
	HostReach bool
	Event     func(status.Event)
	// Connect takes host-local clients of published ports to their
	// networks at connect() (connect.go); nil leaves them to nftables,
	// ConnectOff saying why.
	Connect    *connectmap.Map
	ConnectOff string
}

// Plane owns flyd's networks: their namespaces and links, the ports
// reserved in them, the network and policy documents, the workloads'
// declarations, and the rules all of these come to. The supervisor calls
// it once on a workload's way in (Attach) and once on its way out
// (Detach), and for the documents. Which lock guards which field, and the
// order they are taken in, is in the package's doc.
type Plane struct {
	// Set at Open and never changed; nets and ports lock themselves.
	cfg   Config
	log   *zap.Logger
	fw    *firewall.Firewall
	nets  *sandbox.Networks
	ports *netalloc.Manager

	// mu guards no field: it orders making a network (Reserve) against
	// deleting it once unused (Drop, DeleteNetwork), held through each.
	mu sync.Mutex
	// linkMu guards links, the isolated networks' links by network name;
	// it is held while a network's link is made and its first rules
	// written (Namespace).
	linkMu sync.Mutex
	links  map[string]*sandbox.Link
	// rulesMu has a network's rules computed and written as one
	// (rulesOf, then the firewall's Set): rules computed later are never
	// overwritten by rules computed earlier, as two replicas turning ready
	// at once would. Taken after linkMu, before declMu.
	rulesMu sync.Mutex
	// docMu guards policies, orders the replacements of netDocs, and is
	// held through every projection written, so that what is in force is
	// what the documents say. netDocs, the network documents, is replaced
	// whole under docMu and read without it, so that a network's rules,
	// written with linkMu held, never wait for docMu, which a projection
	// holds while it takes linkMu.
	docMu   sync.Mutex
	netDocs atomic.Pointer[map[string]*spec.Network]
	// policies are the policy documents in force (docMu); guards has one
	// projection written at a time, shared among the changes that ask
	// meanwhile.
	policies map[string]*spec.Policy
	guards   coalescer

	// declMu guards the fields below it up to declared: decls, the
	// workloads' specs as the projection needs them, and appliers, who
	// applied each (for the policies' `users`), as Attach and Restore
	// were told.
	declMu   sync.Mutex
	decls    map[string]Declaration
	appliers map[string]uint32
	// members are the networks each workload is in, from its Attach until
	// its Detach; a workload whose spec moved it is in both until it is
	// released from the old network (Release). quarantined are the
	// workloads whose record did not load (Restore), until they are
	// attached or released. A network none of them uses is deleted when
	// its last reservation goes.
	members     map[string]map[string]bool
	quarantined map[string]Quarantined
	// serving are the replicas ready for connections, replicas each
	// group's declared replicas, by group (replicas.go).
	serving  map[string]bool
	replicas map[string]map[string]bool

	// declared is declared reach's state (declared_plane.go), under its
	// own mutexes.
	declared reachPlane
	// connect is the connect map's contents (connect.go), under its own
	// mutex.
	connect connectPlane
}

// Open opens the namespaces and reservations an earlier daemon left; the
// plane writes nothing until Restore.
func Open(cfg Config) (*Plane, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ContainerPorts == nil {
		cfg.ContainerPorts = func(spec.Kind) bool { return false }
	}
	nets, err := sandbox.NewNetworks(filepath.Join(cfg.RunDir, "netns"))
	if err != nil {
		return nil, err
	}
	ports, err := netalloc.NewManager(filepath.Join(cfg.RunDir, "ports"))
	if err != nil {
		return nil, err
	}
	return &Plane{cfg: cfg, log: cfg.Logger, fw: cfg.Firewall, nets: nets, ports: ports,
		links: map[string]*sandbox.Link{}, policies: map[string]*spec.Policy{}, decls: map[string]Declaration{},
		appliers: map[string]uint32{}, members: map[string]map[string]bool{}, quarantined: map[string]Quarantined{}, serving: map[string]bool{}, replicas: map[string]map[string]bool{}}, nil
}

// Quarantined is a workload whose record an earlier daemon left and this
// one cannot load: its reservations stay, and it uses the network its
// record names, or every network while the record names none and a run
// of it may be alive.
type Quarantined struct {
	Network string
	Running bool
}

// in says whether a quarantined workload may be in network.
func (q Quarantined) in(network string) bool {
	return q.Network == network || q.Network == "" && q.Running
}

// Restore takes up what an earlier daemon left: its documents, the
// declarations of the workloads there are (specs, applied by by), and the
// networks and reservations, of which those neither a spec nor a
// quarantined workload owns are swept; then it writes the rules for
// exactly what is left, replacing what a crash left.
func (p *Plane) Restore(specs map[string]*spec.Workload, by map[string]uint32, quarantined map[string]Quarantined) {
	p.loadNetDocs()
	p.loadPolicies()
	kept := make(map[string]bool, len(specs)+len(quarantined))
	for name, w := range specs {
		p.declare(w, by[name])
		p.join(name, w.Network)
		kept[name] = true
	}
	p.declMu.Lock()
	for name, q := range quarantined {
		p.quarantined[name] = q
		kept[name] = true
	}
	p.declMu.Unlock()
	p.sweep(specs, kept)
	p.syncLinks()
	if err := p.writeGuards(); err != nil {
		p.log.Error("cannot put the policies in force", zap.Error(err))
	}
}

// sweep deletes the isolated networks no spec names and the reservations
// of workloads not kept. A quarantined name keeps its reservations and
// its network, or every network while its record does not say which one
// its run is in (users).
func (p *Plane) sweep(specs map[string]*spec.Workload, kept map[string]bool) {
	used := map[string]bool{}
	for _, w := range specs {
		used[w.Network] = true
	}
	names, err := p.nets.List()
	if err != nil {
		p.log.Warn("cannot list networks", zap.Error(err))
	}
	for _, n := range names {
		if !used[n] && len(p.users(n)) == 0 {
			p.log.Info("deleting a network no spec uses", zap.String("network", n))
			if err := p.nets.Delete(n); err != nil {
				p.log.Warn("cannot delete network", zap.String("network", n), zap.Error(err))
			}
		}
	}
	// A group holds its ports while a replica of it is kept.
	groups := map[string]bool{}
	for name, w := range specs {
		if w.ReplicaOf != "" && kept[name] {
			groups[w.ReplicaOf] = true
		}
	}
	for _, r := range p.ports.List() {
		if groups[r.Workload] {
			continue
		}
		w, ok := specs[r.Workload]
		publishes := ok && r.Network == spec.NetworkHost && len(p.publishRequests(w)) > 0
		if !kept[r.Workload] || ok && w.Network != r.Network && !publishes {
			_ = p.ports.Release(r.Workload, r.Network)
		}
	}
}

// Namespace opens the namespace of a network, creating it on first use,
// linked to the host when the plane has a pool; nil for the host.
func (p *Plane) Namespace(name string) (*sandbox.Network, error) {
	if name == spec.NetworkHost {
		return nil, nil
	}
	nw, err := p.nets.Ensure(name)
	if err != nil || !p.cfg.Pool.IsValid() {
		return nw, err
	}
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	if l := p.links[name]; l != nil {
		nw.Link = l
		return nw, nil
	}
	l, err := p.nets.Connect(nw, p.cfg.Pool)
	if err != nil {
		return nil, err
	}
	if err := p.allowNetwork(name, l); err != nil {
		return nil, err
	}
	p.links[name] = l
	nw.Link = l
	return nw, nil
}

// Wait waits until the links of deleted networks are gone (sandbox
// deletes them in the background): before the daemon exits.
func (p *Plane) Wait() {
	if err := p.nets.Wait(); err != nil {
		p.log.Warn("links of deleted networks are left to sweep at the next start", zap.Error(err))
	}
}

// Link is an isolated network's link, nil for the host or an island.
func (p *Plane) Link(network string) *sandbox.Link {
	if network == spec.NetworkHost {
		return nil
	}
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	return p.links[network]
}

// InnerAddress is the address the host reaches a workload of network on,
// its link's end in the network; "" for loopback (the host's network, or
// an island, which has no link).
func (p *Plane) InnerAddress(network string) string {
	if l := p.Link(network); l != nil {
		return l.Inner.String()
	}
	return ""
}

// Reservations lists every port reserved, in every network.
func (p *Plane) Reservations() []netalloc.Reservation { return p.ports.List() }
