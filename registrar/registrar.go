package registrar

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/status"
)

// Registry is what the registrar needs of a client; registryclient.Client
// satisfies it. Every method must return promptly once ctx is done: that
// is how Run stops with requests in flight.
type Registry interface {
	Register(ctx context.Context, in registryclient.Instance) (id string, created bool, err error)
	Heartbeat(ctx context.Context, id string) error
	Deregister(ctx context.Context, id string) error
}

// BatchRegistry is a Registry that also renews many leases in one request
// (registryclient.Client does): the registrar then sends the heartbeats
// that fall due together as one batch.
type BatchRegistry interface {
	HeartbeatMany(ctx context.Context, ids []string) []error
}

// BatchRegisterer is a Registry that also registers many instances in
// one request (registryclient.Client does): the registrar then sends the
// registers that fall due together as one batch, which is what lets a
// thousand instances register, on a start, before the first of them is
// due to heart-beat.
type BatchRegisterer interface {
	RegisterMany(ctx context.Context, ins []registryclient.Instance) []error
}

// Negotiator is a Registry that says which extensions of the contract
// the registry announced (registryclient.Client does): the registrar then
// batches only what the registry announced it takes, and speaks the
// contract alone before it has heard. A BatchRegistry or BatchRegisterer
// that is no Negotiator is taken at its word.
type Negotiator interface {
	Extensions() registryclient.Extensions
}

// Lister is a Registry that lists what the registry holds
// (registryclient.Client does): what Sweep needs.
type Lister interface {
	Instances(ctx context.Context, healthyOnly bool) ([]registryclient.Instance, error)
}

// DaemonLabel is the metadata with which a registrar given a
// Config.Daemon marks every instance it registers, so that the next
// registrar of the same daemon knows its own (see Sweep).
const DaemonLabel = "flyd.daemon"

// Config configures a Registrar. Only Registry is required.
type Config struct {
	Registry Registry
	// Daemon names the daemon the registrar registers for, the same
	// across its restarts and different from any other's that shares
	// the registry: every instance carries it as DaemonLabel. "" marks
	// none, and Sweep does nothing.
	Daemon string
	Logger *zap.Logger
	// Workers bounds the requests in flight (default 8).
	Workers int
	// RequestTimeout bounds each request (default 10 s); a request that
	// times out counts as the registry being unreachable.
	RequestTimeout time.Duration
	// OnError is called when an instance's requests start failing, when
	// the kind of failure changes (unreachable, unauthorized, refused
	// content), and when they recover (err == nil) — once per change, not
	// per retry, so an outage does not flood the daemon's events. It runs
	// on a worker without the registrar's lock and must not block. May be
	// nil.
	OnError func(owner, id string, err error)
}

// Default values of Config.
const (
	DefaultWorkers        = 8
	DefaultRequestTimeout = 10 * time.Second
)

// Registrar keeps a registry's view equal to the desired instances. Set,
// Stats and Flush are safe for concurrent use; Run runs once at a time.
type Registrar struct {
	reg      Registry
	batch    BatchRegistry   // reg, when it takes batch heartbeats; else nil
	batchReg BatchRegisterer // reg, when it takes batch registers; else nil
	nego     Negotiator      // reg, when it says what the registry announced; else nil
	daemon   string          // Config.Daemon
	log      *zap.Logger
	workers  int
	timeout  time.Duration
	onError  func(owner, id string, err error)

	// notify wakes the scheduler after a Set; one pending wake is enough
	// because the scheduler re-reads the whole queue.
	notify chan struct{}
	// engine is held by whoever runs the scheduler (Run or Flush), so that
	// two schedulers never race over the same entries.
	engine chan struct{}

	// mu guards the fields below and every entry's fields (a job carries
	// copies of what its request sends); it is never held during a
	// request, and nothing else is taken while it is held. A dispatch
	// holds it while it sends jobs, which never blocks (schedule).
	mu      sync.Mutex
	entries map[string]*entry
	owners  map[string]map[string]struct{} // owner → desired ids
	queue   queue
	// down holds the entries waiting out the backoff of an unreachable
	// registry: the first answer the registry gives again retries them
	// at once (see recovered).
	down    map[*entry]struct{}
	drained chan struct{} // closed when entries becomes empty; nil unless awaited

	heartbeats uint64
	failures   uint64
	lastErr    string
}

// New returns a Registrar that does nothing until Run.
func New(cfg Config) *Registrar {
	if cfg.Registry == nil {
		panic("registrar: Config.Registry is nil")
	}
	r := &Registrar{
		reg:     cfg.Registry,
		log:     cfg.Logger,
		workers: cfg.Workers,
		timeout: cfg.RequestTimeout,
		onError: cfg.OnError,
		daemon:  cfg.Daemon,
		notify:  make(chan struct{}, 1),
		engine:  make(chan struct{}, 1),
		entries: map[string]*entry{},
		owners:  map[string]map[string]struct{}{},
		down:    map[*entry]struct{}{},
	}
	if b, ok := cfg.Registry.(BatchRegistry); ok {
		r.batch = b
	}
	if b, ok := cfg.Registry.(BatchRegisterer); ok {
		r.batchReg = b
	}
	if n, ok := cfg.Registry.(Negotiator); ok {
		r.nego = n
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if r.workers <= 0 {
		r.workers = DefaultWorkers
	}
	if r.timeout <= 0 {
		r.timeout = DefaultRequestTimeout
	}
	return r
}

// Set replaces the desired instances of owner; nil or empty means none, so
// all of the owner's are deregistered. Instances are identified by
// Instance.ID: an id that another owner had moves to this one. An instance
// whose content changed is re-registered at once, unless the registry is
// failing, in which case the retry already scheduled carries the new
// content. Set never blocks on the network.
func (r *Registrar) Set(owner string, instances []registryclient.Instance) {
	now := time.Now()
	changed := false
	var ids map[string]struct{}
	if len(instances) > 0 {
		ids = make(map[string]struct{}, len(instances))
	}

	r.mu.Lock()
	for i := range instances {
		in := &instances[i]
		if in.ID == "" {
			r.log.Warn("registrar: instance without id ignored", zap.String("owner", owner), zap.String("name", in.Name))
			continue
		}
		ids[in.ID] = struct{}{}
		changed = r.want(owner, r.stamp(in), now) || changed
	}
	for id := range r.owners[owner] {
		if _, ok := ids[id]; !ok {
			changed = r.unwant(owner, id, now) || changed
		}
	}
	if len(ids) == 0 {
		delete(r.owners, owner)
	} else {
		r.owners[owner] = ids
	}
	r.mu.Unlock()

	if changed {
		r.poke()
	}
}

// stamp is in as the registry is given it: with the daemon's label.
func (r *Registrar) stamp(in *registryclient.Instance) *registryclient.Instance {
	if r.daemon == "" {
		return in
	}
	c := *in
	c.Metadata = make(map[string]string, len(in.Metadata)+1)
	maps.Copy(c.Metadata, in.Metadata)
	c.Metadata[DaemonLabel] = r.daemon
	return &c
}

// Sweep deregisters what an earlier run of this daemon left registered
// and nothing wants any more: the instances the registry holds with this
// registrar's DaemonLabel that keep does not keep, and that no Set has
// made the registrar's own meanwhile. It is for a daemon that starts
// after one that died (kill -9, a crash during a down) with instances of
// workloads since removed, which would otherwise stay served until their
// leases lapse. The deregisters go as any other, with backoff on
// failure, and a Set that wants an id again cancels its deregister. It
// returns how many it took.
func (r *Registrar) Sweep(ctx context.Context, keep func(registryclient.Instance) bool) (int, error) {
	l, ok := r.reg.(Lister)
	if r.daemon == "" || !ok {
		return 0, nil
	}
	listed, err := l.Instances(ctx, false)
	if err != nil {
		return 0, fmt.Errorf("registrar: listing what the registry holds: %w", err)
	}
	var stale []registryclient.Instance
	for _, in := range listed {
		if in.Metadata[DaemonLabel] == r.daemon && !keep(in) {
			stale = append(stale, in)
		}
	}
	now := time.Now()
	n := 0
	r.mu.Lock()
	for _, in := range stale {
		if _, ok := r.entries[in.ID]; ok {
			continue // in hand: wanted, or already on its way out
		}
		e := &entry{id: in.ID, owner: in.Metadata["flyd.workload"], held: true, want: in, index: -1}
		r.entries[in.ID] = e
		r.queue.at(e, now)
		n++
	}
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("registrar: deregistering what an earlier run left registered", zap.Int("instances", n))
		r.poke()
	}
	return n, nil
}

// want makes in desired for owner; it reports whether anything changed.
// Called with r.mu held.
func (r *Registrar) want(owner string, in *registryclient.Instance, now time.Time) bool {
	e := r.entries[in.ID]
	if e == nil {
		e = &entry{id: in.ID, owner: owner, desired: true, want: own(in), gen: 1, index: -1}
		r.entries[in.ID] = e
		r.queue.at(e, now)
		return true
	}
	if e.owner != owner {
		if e.desired {
			r.log.Warn("registrar: instance id moved to another owner",
				zap.String("id", e.id), zap.String("from", e.owner), zap.String("to", owner))
			delete(r.owners[e.owner], e.id)
			if len(r.owners[e.owner]) == 0 {
				delete(r.owners, e.owner)
			}
		}
		e.owner = owner
	}
	changed := false
	if !sameContent(&e.want, in) {
		e.want, e.gen, changed = own(in), e.gen+1, true
	}
	if !e.desired {
		e.desired, changed = true, true
		if e.inflight == opDeregister {
			// Wanted again: the deregister in flight is now wrong. Should it
			// land anyway, the next heartbeat's 410 re-registers.
			e.cancel()
			e.superseded = true
		}
	}
	if changed {
		r.soon(e, now)
	}
	return changed
}

// unwant ends owner's desire for id. Called with r.mu held.
func (r *Registrar) unwant(owner, id string, now time.Time) bool {
	e := r.entries[id]
	if e == nil || e.owner != owner || !e.desired {
		return false
	}
	e.desired = false
	if e.inflight == opNone && !e.held {
		r.drop(e)
		return true
	}
	r.soon(e, now)
	return true
}

// soon schedules a change to be sent now, unless the registry is down or
// refusing the key: a change does not fix those, and pulling the retry
// forward on every Set would let a flapping health check defeat the
// backoff. Called with r.mu held.
func (r *Registrar) soon(e *entry, now time.Time) {
	if e.failures > 0 && (e.failing == classDown || e.failing == classRefused) {
		return
	}
	r.queue.earlier(e, now)
}

// drop forgets e. Called with r.mu held.
func (r *Registrar) drop(e *entry) {
	r.queue.remove(e)
	delete(r.down, e)
	delete(r.entries, e.id)
	if len(r.entries) == 0 && r.drained != nil {
		close(r.drained)
		r.drained = nil
	}
}

func (r *Registrar) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// Stats is a snapshot for status and metrics.
type Stats struct {
	Desired    int    // instances the daemon wants registered
	Registered int    // instances whose lease the registry acknowledged and has not lapsed
	Failing    int    // instances whose last request failed
	Heartbeats uint64 // heartbeats acknowledged, ever
	Failures   uint64 // requests failed, ever
	LastError  string // the last failure, for display
}

// Stats returns a snapshot.
func (r *Registrar) Stats() Stats {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Heartbeats: r.heartbeats, Failures: r.failures, LastError: r.lastErr}
	for _, e := range r.entries {
		if e.desired {
			s.Desired++
		}
		if e.registered && now.Sub(e.renewedAt) < e.lease {
			s.Registered++
		}
		if e.failures > 0 {
			s.Failing++
		}
	}
	return s
}

// Status is the registry as `flyd status` shows it: where it is (url)
// and with which key, and this registrar's Stats; a nil registrar, the
// registry off, shows none.
func (r *Registrar) Status(url, keyFile string) status.Registry {
	st := status.Registry{URL: url, KeyFile: keyFile}
	if r == nil {
		return st
	}
	s := r.Stats()
	st.Desired, st.Registered, st.Failing = s.Desired, s.Registered, s.Failing
	st.Heartbeats, st.Failures, st.LastError = s.Heartbeats, s.Failures, s.LastError
	return st
}
