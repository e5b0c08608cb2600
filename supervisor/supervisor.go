// Package supervisor decides what runs. It keeps each workload's desired
// state on disk, starts runs through a driver, restarts them by policy with
// backoff, stops them without leaving a process behind, adopts the runs of
// an earlier daemon, and reports every change as an event.
//
// Each workload is owned by one goroutine that serialises its lifecycle;
// the API's calls are messages to it. Drivers only run things; the
// supervisor never knows how. It also keeps the `after` order between
// workloads (with package order's rules), groups of replicas and their
// rolling replace, scheduled workloads, the quarantine of records that do
// not load, and when a run's hooks (runhook.Chain) acquire and release.
//
// It speaks spec and status, never the wire (api); what a run's network,
// cgroup, log and mounts are is each hook's concern (netplane, usage,
// logpipe, mounts, health), and documents other than workloads are
// package documents'.
package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/mounts"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/schedule"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/usage"
	"github.com/flyd-dev/flyd/workspace"
)

// Config is what a supervisor is built from.
type Config struct {
	StateDir string // desired state and logs
	RunDir   string // runtime state; gone after a reboot
	// Store keeps the desired state and run records, Events carries what
	// happens to readers, and Net is the network plane: the daemon opens
	// them before the supervisor and closes them after it.
	Store   *records.Store
	Events  *events.Bus
	Net     *netplane.Plane
	Drivers []driver.Driver
	Logger  *zap.Logger
	// LogMaxSize and LogGenerations rotate each workload's log file.
	LogMaxSize     int64
	LogGenerations int
	// PeerLogBytes, under PeerLanes, bounds the log of each workload a
	// caller other than root applied, on disk, its rotated files
	// included: that caller's share of the log space divided among the
	// workloads it may hold. 0: the bound of every other log.
	PeerLogBytes int64
	// LogPipes carries runs' output to their logs; nil has every run
	// write its log file itself, as a containerd shim does.
	LogPipes *logpipe.Pipes
	// StopOnClose stops every workload on Close instead of leaving it
	// running for the next daemon to adopt.
	StopOnClose bool
	// AdvertiseAddress is the address other hosts reach host-network
	// endpoints on; empty publishes no public instance.
	AdvertiseAddress string
	// Registrar heart-beats running workloads' endpoints into a registry;
	// nil when the registry is off.
	Registrar *registrar.Registrar
	// Cgroups gives each workload a cgroup with its limits; nil where the
	// host has none for flyd, and then `resources` is refused.
	Cgroups *sandbox.Cgroups
	// Shms are the projects' own /dev/shm (package mounts); nil: every
	// run has the host's.
	Shms *sandbox.Shms
	// Workspaces are the workspace documents in force, opened over Store
	// by the daemon and kept by the documents: each workload gets its
	// workspace's configurations from its next start.
	Workspaces *workspace.Set
	// PeerLanes says that --peer-users holds callers other than root to
	// lanes of their own: then a name of root's resolves to root's
	// workloads alone (owners.go). Without it every caller is root's equal.
	PeerLanes bool
}

// Supervisor owns every workload of one daemon.
type Supervisor struct {
	cfg     Config
	log     *zap.Logger
	store   *records.Store
	drivers driver.Runtimes
	events  *events.Bus
	// host is this host as the registry's instances say it.
	host   registrar.Host
	logDir string
	// carriers holds one directory per run with file carriers.
	carriers carriers.Root
	// notifyDir holds the notify sockets of runs (health.NotifyPath).
	notifyDir string

	// net is the network plane: networks, ports, documents and rules.
	net *netplane.Plane
	// workspaces are the workspace documents in force.
	workspaces *workspace.Set

	logs *logfile.Book
	// rotator keeps the logs runs write themselves within their bound.
	rotator *logfile.Rotator
	// hooks are the steps of every workload's runs but its health's
	// (hooks.go): network, cgroup and limits, logs, in order.
	hooks      runhook.Chain
	cgroupHook *usage.CgroupHook
	logHook    *logpipe.Hook
	mountHook  *mounts.Hook

	// limits watches the workloads whose spec sets a limit.
	limits *usage.Limits
	// settle returns a large batch's garbage to the kernel once at rest
	// (settle.go).
	settle settler

	// mu guards workloads and dependents, and orders a workload's
	// registration against its removal (register, forget); it is never
	// held while a workload's loop is waited for, and no other lock of the
	// supervisor's is taken while it is held.
	mu        sync.Mutex
	workloads map[string]*workload
	// dependents are the workloads whose spec names prerequisites: the
	// only ones a start can unblock (kickDependents).
	dependents map[*workload]struct{}

	// quarantine holds the stored records that do not load (quarantine.go).
	quarantine *records.Quarantine

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New takes up the state an earlier daemon left in cfg.Store, adopts or
// restarts its workloads, and removes runs that no spec owns any more.
func New(cfg Config) (*Supervisor, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LogMaxSize <= 0 {
		cfg.LogMaxSize = logfile.DefaultMaxSize
	}
	if cfg.LogGenerations <= 0 {
		cfg.LogGenerations = logfile.DefaultGenerations
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:        cfg,
		log:        cfg.Logger,
		store:      cfg.Store,
		drivers:    driver.NewRuntimes(cfg.Drivers),
		events:     cfg.Events,
		net:        cfg.Net,
		workspaces: cfg.Workspaces,
		logDir:     filepath.Join(cfg.StateDir, "logs"),
		notifyDir:  filepath.Join(cfg.RunDir, "notify"),
		workloads:  map[string]*workload{},
		dependents: map[*workload]struct{}{},
		ctx:        ctx,
		cancel:     cancel,
	}
	s.host = registrar.ThisHost(cfg.AdvertiseAddress, s.net.InnerAddress)
	s.logs = logfile.NewBook(s.logDir, cfg.LogMaxSize, cfg.LogGenerations)
	s.limits = usage.NewLimits(cfg.Cgroups, s.limitHit)
	var err error
	if err = os.MkdirAll(s.logDir, 0o750); err == nil {
		s.carriers, err = carriers.OpenRoot(filepath.Join(cfg.RunDir, "carriers"))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	s.cgroupHook = usage.NewCgroupHook(cfg.Cgroups, s.limits, s.net.Placed, s.log)
	if s.rotator, err = logfile.NewRotator(s.logs, cfg.LogMaxSize, s.cgroupHook.HoldWriters, func(name, msg string, err error) {
		s.log.Warn(msg, zap.String("workload", name), zap.Error(err))
	}); err != nil {
		s.log.Warn("quiet logs are looked at every few seconds instead of when written", zap.Error(err))
	}
	s.logHook = logpipe.NewHook(cfg.LogPipes, s.logs, s.rotator, s.log)
	s.mountHook = mounts.NewHook(cfg.Shms, cfg.StateDir, s.net.InNetwork, s.log)
	s.hooks = runhook.Chain{s.net.Hook(), s.cgroupHook, s.logHook, s.mountHook}
	s.restore()
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.net.WatchReach(s.ctx) }()
	go func() { defer s.wg.Done(); s.rotator.Run(s.ctx) }()
	go func() { defer s.wg.Done(); s.limits.Run(s.ctx) }()
	return s, nil
}

// restore brings back the previous daemon's workloads. Runs are adopted
// here, before any loop starts, so that everything no live run owns can be
// swept: runs without a spec, carrier directories without a run. A record
// that does not load is quarantined, and what its run owns is kept.
func (s *Supervisor) restore() {
	recs, bad := s.store.Workloads()
	s.quarantine = records.NewQuarantine(s.store, bad, s.log)
	specs := map[string]records.Workload{}
	by := map[string]uint32{}
	for _, r := range recs {
		specs[r.Spec.Name] = r
		by[r.Spec.Name] = r.By
	}
	runs := map[string]*records.Recovered{}
	var keep []string      // the carrier directories of runs that live on
	var live []mounts.Live // the runs that live on, for their mounts
	names := s.store.RunNames()
	found := s.store.RecoverRuns(s.ctx, names, s.drivers.Recover)
	for i, name := range names {
		r := found[i]
		if r == nil {
			_ = s.store.RemoveRun(name)
			continue
		}
		rec, d := r.Run, s.drivers[r.Run.Process.Driver]
		if s.quarantine.Has(name) {
			// Its spec is there but cannot be read: the run may be the
			// workload, serving fine, and nothing of it is touched.
			if d == nil {
				r.Err = fmt.Errorf("%w: this daemon has no %s runtime", errdefs.ErrRuntimeUnavailable, rec.Process.Driver)
			}
			if s.quarantine.Keep(name, *r) {
				keep = append(keep, rec.Process.CarrierDir)
				live = append(live, mounts.Live{Workload: name, Kept: rec.Kept})
			}
			continue
		}
		if _, owned := specs[name]; !owned {
			// Removed while no daemon ran, or its spec was lost: nothing
			// may keep it alive.
			switch {
			case r.Proc != nil:
				s.log.Warn("killing a run no spec owns", zap.String("workload", name), zap.Int("pid", rec.Process.PID))
				_ = r.Proc.Kill()
				<-r.Proc.Done()
			case r.Err != nil:
				// Its record stays for the next daemon, and its runtime's
				// sweep removes it once that answers.
				s.log.Warn("cannot adopt a run no spec owns, to kill it", zap.String("workload", name), zap.Error(r.Err))
				continue
			}
			_ = s.store.RemoveRun(name)
			continue
		}
		if r.Proc != nil || r.Err != nil {
			keep = append(keep, rec.Process.CarrierDir)
			live = append(live, mounts.Live{Workload: name, Kept: rec.Kept})
		}
		runs[name] = r
	}
	s.logQuarantine()
	s.logHook.AdoptAll(func(name string) bool {
		_, ok := specs[name]
		return ok || s.quarantine.Has(name)
	})
	s.carriers.Sweep(keep, func(dir string, err error) {
		s.log.Warn("cannot sweep carriers", zap.String("dir", dir), zap.Error(err))
	})
	// In force before any workload's loop can start a run.
	s.net.Restore(specsOf(specs), by, s.quarantinedNetworks())
	s.cgroupHook.Sweep(s.kept(specs))
	// Before any loop adopts a run or starts one.
	s.mountHook.Sweep(live)
	s.sweepDrivers(specs)
	for _, r := range recs {
		run := runs[r.Spec.Name]
		// Until its loop has looked, a workload that is to run shows
		// pending, and one at rest the state it was left in, with how
		// its last run ended: never the one without the other.
		initial := status.Workload{State: status.Pending}
		if !r.Running {
			initial = status.Workload{State: cmp.Or(r.Rest, status.Stopped), Reason: r.Reason,
				LastError: r.LastError, StartedAt: r.StartedAt, LastExit: r.LastExit.Exit(), Restarts: r.Restarts}
		}
		s.register(r.Spec, s.net.Mappings(r.Spec), initial, func(w *workload) { w.restoreScheduled(r, run) })
	}
}

// register adds a workload and starts its loop, unless one of that name
// exists: then it returns that one. first runs on the loop before any
// command, so nothing can overtake it.
func (s *Supervisor) register(sp *spec.Workload, ports []status.PortMapping, initial status.Workload, first func(*workload)) (*workload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workloads[sp.Name]; ok {
		return w, false
	}
	w := &workload{
		s:       s,
		name:    sp.Name,
		group:   sp.ReplicaOf,
		spec:    sp,
		cmds:    make(chan func()),
		killNow: make(chan struct{}, 1),
		exited:  make(chan struct{}),
		log:     workloadLog{s.log, sp.Name},
	}
	w.sched = schedule.New(w.showNext)
	initial.Name, initial.Since, initial.Group = sp.Name, time.Now(), sp.ReplicaOf
	w.view.Store(&initial)
	w.setSpec(sp, ports)
	s.trackDependentLocked(w, sp)
	s.workloads[sp.Name] = w
	s.wg.Add(1)
	go w.loop(first)
	return w, true
}

func (s *Supervisor) lookup(name string) (*workload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[name]
	if !ok {
		return nil, fmt.Errorf("%w: no workload named %q", errdefs.ErrNotFound, name)
	}
	return w, nil
}

// unsorted is every workload, in no order: for loops that visit them all
// often and need no order.
func (s *Supervisor) unsorted() []*workload {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := make([]*workload, 0, len(s.workloads))
	for _, w := range s.workloads {
		ws = append(ws, w)
	}
	return ws
}

// all is every workload, sorted by name.
func (s *Supervisor) all() []*workload {
	ws := s.unsorted()
	sort.Slice(ws, func(i, j int) bool { return ws[i].name < ws[j].name })
	return ws
}

func (s *Supervisor) forget(w *workload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workloads[w.name] == w {
		delete(s.workloads, w.name)
	}
	delete(s.dependents, w)
}

func (s *Supervisor) publish(ev status.Event) {
	ev.Time = time.Now()
	if ev.Project == "" {
		ev.Project = spec.ProjectOf(ev.Workload)
	}
	if err := s.events.Publish(ev); err != nil {
		s.log.Warn("cannot keep events for readers that resume; they still go to those reading now", zap.Error(err))
	}
}

// Close stops watching: every workload is released to run on (or stopped,
// with StopOnClose), its state flushed for the next daemon. The store, the
// event bus and the network plane stay open for their owner to close.
// HostsFile is the isolated network's /etc/hosts for its runs while one
// of them has it, or "" (mounts.Hook.HostsFile).
func (s *Supervisor) HostsFile(network string) string { return s.mountHook.HostsFile(network) }

func (s *Supervisor) Close() {
	all := s.all()
	for _, w := range all {
		// A stop in progress would hold the loop for its grace period:
		// the daemon going away makes it a kill.
		w.killStopNow()
	}
	detach := func(w *workload) {
		_ = w.call(context.Background(), func() error { w.detach(s.cfg.StopOnClose); return nil })
	}
	if s.cfg.StopOnClose {
		// Stopped, dependents go first, as a down's.
		names := make([]string, len(all))
		for i, w := range all {
			names[i] = w.name
		}
		s.inStopOrder(names, false, func(name string) Outcome {
			if w, err := s.lookup(name); err == nil {
				detach(w)
			}
			return Outcome{Name: name}
		})
	} else {
		// Released to run on: all at once.
		var wg sync.WaitGroup
		for _, w := range all {
			wg.Go(func() { detach(w) })
		}
		wg.Wait()
	}
	s.settle.close()
	s.quarantine.Release()
	s.cancel()
	s.wg.Wait()
	_ = s.rotator.Close()
	s.logs.Close()
}
