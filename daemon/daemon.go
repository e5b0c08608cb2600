package daemon

// Run is the daemon: it makes and checks its paths, takes its locks, opens
// its records and event bus, builds the registry, the runtimes and the
// network plane, then the supervisor over them and the workloads directory
// and API above it, serves the API until a signal or ctx ends it, and
// shuts down in the reverse order.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api/server"
	"github.com/flyd-dev/flyd/declarative"
	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/internal/instance"
	"github.com/flyd-dev/flyd/internal/trust"
	"github.com/flyd-dev/flyd/logpipe"
	"github.com/flyd-dev/flyd/metrics"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/usage"
	"github.com/flyd-dev/flyd/workspace"
)

// Config is what the daemon runs with: the daemon program's flags,
// parsed.
type Config struct {
	Socket, SocketGroup string
	// PeerUsers are the users that may be peers (comma-separated): a
	// caller other than root runs workloads only as itself, and only if
	// named; empty, every member of the socket group is root's equal.
	PeerUsers string
	// PeerShares are what one peer holds at most (server.Shares); zero:
	// server.DefaultShares.
	PeerShares       server.Shares
	StateDir, RunDir string
	WorkloadsDir     string
	StopOnExit       bool
	// NoPublishAtConnect leaves the host's own clients of a published
	// port to nftables' DNAT alone, without the BPF rewrite at connect().
	NoPublishAtConnect bool
	LogMaxSize         int64
	LogGenerations     int
	AdvertiseAddress   string
	NetworkPool        string
	ReachHost          string // declared or off (empty): the host network's reach
	CgroupParent       string // empty: named after the run dir
	ContainerdSocket   string
	Registry           string
	RegistryKeyFile    string
	RegistryCA         string // the CA (PEM) that signed an HTTPS registry's certificate; empty: the system's
	RegistryListen     string // empty: named after the run dir
	Version            string

	// RegistryTLSCert and RegistryTLSKey serve the embedded registry on
	// HTTPS: its certificate (PEM, the chain after it) and key. Empty:
	// plain HTTP.
	RegistryTLSCert, RegistryTLSKey string
}

// Run runs the daemon until SIGTERM, SIGINT or ctx's end: its steps in
// order, each opening what the next ones use and saying how it is closed;
// then it serves; then everything opened is closed, in the reverse order,
// on one path, however far the steps went.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	d := &run{ctx: ctx, cfg: cfg, log: log}
	defer func() {
		d.close()
		if d.served {
			log.Info("flyd daemon stopped")
		}
	}()
	for _, step := range []func() error{
		d.trustPaths, // the state, run, socket and workloads dirs, judged and made
		d.lock,       // one daemon per socket and state dir; the reaper
		d.listen,     // the API's socket
		d.openState,  // the records and the event bus, closed last
		d.openRegistry,
		d.openLogPipes, // and their holder, in systemd's tree where systemd runs the host
		d.openCgroups,  // the workloads' parent, held
		d.openRuntimes,
		d.openPlane, // the network plane, its links, rules and reach
		d.openSupervisor,
		d.openAPI, // the documents, the workloads directory, the backend and its server
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return d.serve()
}

// run is one daemon's parts as its steps open them, and what closes each.
type run struct {
	ctx    context.Context
	cfg    Config
	log    *zap.Logger
	policy func(server.Peer, *spec.Workload) error // --peer-users; nil without
	// cgroupDefault: no --cgroup-parent was given, and the daemon places
	// its workloads where the host's manager expects them.
	cgroupDefault bool

	// closers close what the steps opened, run last to first.
	closers []func()
	served  bool // the daemon served, and stops

	l          net.Listener
	st         *records.Store
	bus        *events.Bus
	publish    func(status.Event)
	reg        *daemonRegistry
	place      *placement // systemd's scope for the workloads; nil without
	cgroups    *sandbox.Cgroups
	drivers    []driver.Driver
	pipes      *logpipe.Pipes
	plane      *netplane.Plane
	workspaces *workspace.Set
	started    time.Time
	sup        *supervisor.Supervisor
	wd         *declarative.Watcher
	backend    *Backend
	srv        *server.Server
}

// onClose has f run when the daemon closes, before what was opened
// earlier is closed.
func (d *run) onClose(f func()) { d.closers = append(d.closers, f) }

func (d *run) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// trustPaths judges the daemon's directories and makes those missing.
// Descriptors the daemon inherited (a CI runner's pipe, a shell's fds)
// must not reach workloads, which would hold them open long after the
// daemon is gone: Go sets close-on-exec on its own descriptors only.
func (d *run) trustPaths() error {
	cfg := &d.cfg
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		d.log.Warn("cannot mark inherited descriptors close-on-exec", zap.Error(err))
	}
	// Checked before anything is made in them, and again once made: a
	// directory another user made or can write is refused, not used. From
	// then on the daemon uses the paths as resolved, so that no symlink
	// re-pointed later moves what it trusted.
	sockDir := filepath.Dir(cfg.Socket)
	dirs := []struct {
		what string
		path *string
		mode os.FileMode
	}{{"state dir", &cfg.StateDir, 0o700}, {"run dir", &cfg.RunDir, 0o755},
		{"socket dir", &sockDir, 0o755}, {"workloads dir", &cfg.WorkloadsDir, 0o755}}
	for _, dir := range dirs {
		real, err := trust.Dir(dir.what, *dir.path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(real, dir.mode); err != nil {
			return err
		}
		if *dir.path, err = trust.Dir(dir.what, real); err != nil {
			return err
		}
	}
	cfg.Socket = filepath.Join(sockDir, filepath.Base(cfg.Socket))
	// What the daemon makes in the host's shared namespaces is named after
	// its run dir, so that daemons side by side never meet there.
	if cfg.CgroupParent == "" {
		// Under systemd on cgroup v2, the scope instead (openLogPipes).
		d.cgroupDefault = true
		cfg.CgroupParent = instance.Name(cfg.RunDir)
	}
	if cfg.RegistryListen == "" {
		cfg.RegistryListen = instance.RegistryListen(cfg.RunDir)
	}
	var err error
	if d.policy, err = server.PeerUsersPolicy(cfg.PeerUsers); err != nil {
		return err
	}
	if cfg.PeerShares == (server.Shares{}) {
		cfg.PeerShares = server.DefaultShares
	}
	return cfg.PeerShares.Check()
}

// lock takes the instance's locks, and makes the daemon the reaper of its
// workloads' orphans.
func (d *run) lock() error {
	unlock, err := lockInstance(d.cfg)
	if err != nil {
		return err
	}
	d.onClose(unlock)
	reapCtx, stopReaping := context.WithCancel(context.Background())
	d.onClose(stopReaping)
	if err := reaper.Become(reapCtx); err != nil {
		d.log.Warn("cannot become the reaper of orphaned workload processes", zap.Error(err))
	}
	return nil
}

func (d *run) listen() error {
	l, err := listen(d.cfg.Socket, d.cfg.SocketGroup, d.log)
	if err != nil {
		return err
	}
	d.l = l
	d.onClose(func() { os.Remove(d.cfg.Socket) })
	d.onClose(func() { l.Close() }) // once served, closed already
	return nil
}

// openState opens the records and the event bus: everything after
// reports into them or reads them, so they close last.
func (d *run) openState() error {
	st, bus, err := openState(d.cfg, d.log)
	if err != nil {
		return err
	}
	d.st, d.bus, d.publish = st, bus, publisher(bus, d.log)
	d.onClose(func() {
		bus.Close()
		if err := st.Close(); err != nil {
			d.log.Warn("closing the state journal", zap.Error(err))
		}
	})
	return nil
}

func (d *run) openRegistry() error {
	reg, err := startRegistry(d.ctx, d.cfg, d.log, registryProblem(d.publish))
	if err != nil {
		return err
	}
	d.reg = reg
	d.onClose(reg.close)
	return nil
}

// openLogPipes reaches the log holder, or starts one. Under systemd on
// cgroup v2, with no --cgroup-parent given, the holder is what keeps the
// workloads' scope alive (placement.go): it is placed in it, and the scope
// made for it if need be.
func (d *run) openLogPipes() error {
	if d.cgroupDefault {
		d.place = systemdPlacement(d.ctx, instance.Name(d.cfg.RunDir), d.log)
		if d.place != nil && d.earlierParentHolds() {
			d.place = nil
		}
	}
	if d.pipes = openLogPipes(d.ctx, d.cfg.RunDir, d.place, d.log); d.pipes != nil {
		d.onClose(func() { d.pipes.Close() })
	}
	return nil
}

// earlierParentHolds reports whether workloads run in the cgroup parent
// from the root that the daemon would use without systemd's scope: an
// older flyd's, which placed them there under systemd too. Those are kept
// where they run, and so is the parent: the daemon uses it as before, and
// adopts them with their limits and their sockets' cgroups as they were.
// A daemon that starts while none runs there removes it, and moves into
// the scope.
func (d *run) earlierParentHolds() bool {
	p, err := sandbox.OpenEarlierParent(d.cfg.CgroupParent)
	if err != nil || p == nil {
		return false
	}
	defer p.Close() // held again by openCgroups when kept
	busy, err := p.Populated()
	if err != nil {
		d.log.Warn("cannot tell whether workloads run in the cgroup parent from before: it is kept", zap.String("cgroup_parent", p.Dir()), zap.Error(err))
		return true
	}
	if busy {
		d.log.Info("workloads started by an earlier daemon run in its cgroup parent, outside systemd's tree: it is kept, until a daemon starts with none running there", zap.String("cgroup_parent", p.Dir()), zap.String("scope", d.place.unit))
		return true
	}
	if err := p.Remove(); err != nil {
		d.log.Warn("cannot remove the cgroup parent from before", zap.String("cgroup_parent", p.Dir()), zap.Error(err))
	}
	return false
}

// openCgroups makes and holds the workloads' parent cgroup: held before
// anything is swept, so that a daemon never deletes, kills or reuses the
// cgroups of another given the same parent. Without cgroups workloads
// still run, without limits and with the process group as the only handle
// on their children.
func (d *run) openCgroups() error {
	if d.place != nil {
		if err := d.placeInScope(); err != nil {
			d.place.off.Store(true)
			d.log.Warn("cannot place the workloads in systemd's tree: their cgroups are under --cgroup-parent from the hierarchy's root", zap.String("scope", d.place.unit), zap.String("cgroup_parent", d.cfg.CgroupParent), zap.Error(err))
		} else {
			d.cfg.CgroupParent = d.place.parent
		}
	}
	var cgroups *sandbox.Cgroups
	var err error
	scoped := d.place != nil && !d.place.off.Load()
	if scoped {
		cgroups, err = sandbox.NewDelegatedCgroups(d.cfg.CgroupParent)
	} else {
		cgroups, err = sandbox.NewCgroups(d.cfg.CgroupParent)
	}
	if err != nil {
		d.log.Warn("no cgroups: resources are refused and a child that leaves its session escapes stop", zap.Error(err))
		return nil
	}
	release, err := cgroups.Claim()
	if err != nil {
		return err
	}
	d.cgroups = cgroups
	d.log.Info("workloads' cgroups", zap.String("parent", "/"+cgroups.Parent()), zap.Bool("systemd_scope", scoped))
	d.onClose(func() {
		// An empty parent goes with the daemon, however it ends, so that
		// a host without workloads keeps no cgroup of flyd's; one that
		// holds workloads stays for them and for the next daemon. The
		// scope is systemd's: it goes once its last process has.
		if !scoped {
			if err := cgroups.RemoveParent(); err != nil && !errors.Is(err, errdefs.ErrConflict) {
				d.log.Warn("cannot remove the workloads' parent cgroup", zap.Error(err))
			}
		}
		release()
	})
	return nil
}

// placeInScope has the log holder keep the workloads' scope, made if
// systemd has none running.
func (d *run) placeInScope() error {
	if d.pipes == nil {
		return errors.New("no log holder keeps the scope alive")
	}
	pid, err := d.pipes.HolderPID()
	if err != nil {
		return err
	}
	_, err = d.place.keep(d.ctx, pid)
	return err
}

// openRuntimes opens the runtimes.
func (d *run) openRuntimes() error {
	drivers, closeDrivers := runtimes(d.ctx, &d.cfg, d.cgroups, d.log)
	d.drivers = drivers
	d.onClose(closeDrivers)
	return nil
}

// openPlane opens the network plane over its pool and firewall, which
// waits, after the supervisor's close, for the links of deleted networks
// to go.
func (d *run) openPlane() error {
	pool, fw, err := networkLinks(d.cfg, d.log)
	if err != nil {
		return err
	}
	reachHost, err := hostReach(d.cfg, fw, d.cgroups)
	if err != nil {
		return err
	}
	cm, cmOff := openConnectMap(fw, d.cfg.NoPublishAtConnect, d.log)
	if cm != nil {
		d.onClose(func() { _ = cm.Close() }) // after the plane's last write
	}
	plane, err := openPlane(d.cfg, d.st, d.drivers, pool, fw, cm, cmOff, d.cgroups, reachHost, d.publish, d.log)
	if err != nil {
		return err
	}
	d.plane = plane
	d.onClose(plane.Wait)
	d.workspaces = workspace.Open(d.st, d.log.Named("workspaces"))
	return nil
}

// openSupervisor builds the supervisor over the parts, which adopts the
// runs of an earlier daemon; closed, it releases (or stops) the workloads
// and flushes their state, and the registry's instances go when the
// workloads were stopped.
func (d *run) openSupervisor() error {
	cfg := d.cfg
	// A project's host workloads share a /dev/shm of its own.
	shms, err := sandbox.NewShms(filepath.Join(cfg.RunDir, "shm"))
	if err != nil {
		d.log.Warn("projects' workloads share the host's /dev/shm", zap.Error(err))
		shms = nil
	}
	d.started = time.Now()
	sup, err := supervisor.New(supervisor.Config{
		Store:            d.st,
		Events:           d.bus,
		Net:              d.plane,
		Workspaces:       d.workspaces,
		LogPipes:         d.pipes,
		Registrar:        d.reg.registrar,
		LogMaxSize:       cfg.LogMaxSize,
		LogGenerations:   cfg.LogGenerations,
		StateDir:         cfg.StateDir,
		RunDir:           cfg.RunDir,
		Drivers:          d.drivers,
		Cgroups:          d.cgroups,
		Shms:             shms,
		Logger:           d.log,
		StopOnClose:      cfg.StopOnExit,
		AdvertiseAddress: cfg.AdvertiseAddress,
		PeerLanes:        d.policy != nil,
		PeerLogBytes:     cfg.PeerShares.WorkloadLogBytes(),
	})
	if err != nil {
		return err
	}
	d.sup = sup
	callersOfPulls(d.drivers, sup)
	d.onClose(func() {
		sup.Close()
		if cfg.StopOnExit {
			d.reg.flush(d.log)
		}
	})
	d.reg.sweep(func() []status.Workload { return sup.List(context.Background()) }, d.log)
	return nil
}

// openAPI opens what serves the supervisor: the documents, the workloads
// directory's watcher, the backend (its leases) and the API's server.
func (d *run) openAPI() error {
	cfg := d.cfg
	docs, err := documents.New(documents.Config{Owners: d.st.Owners(), Events: d.bus, Logger: d.log.Named("documents"), Keepers: Keepers(d.plane, d.workspaces, d.sup.HostsFile)})
	if err != nil {
		return err
	}
	d.wd, err = declarative.New(declarative.Config{
		Dir: cfg.WorkloadsDir, Applier: fileApplier{d.sup, docs}, Logger: d.log.Named("workloads-dir"), Events: d.bus,
	})
	if err != nil {
		return err
	}
	sup := d.sup
	d.backend = NewBackend(sup, docs, Parts{
		Version: cfg.Version, Started: d.started, Events: d.bus, Runtimes: driver.NewRuntimes(d.drivers), Plane: d.plane, Files: d.wd,
		Usage:     usage.NewSampler(d.cgroups, func() []status.Workload { return sup.List(context.Background()) }),
		Registrar: d.reg.registrar, RegistryURL: d.reg.url, RegistryKeyFile: d.reg.keyFile,
		Leases: d.st, Publish: d.publish, Log: d.log,
	})
	m := metrics.New(d.backend)
	opts := []server.Option{server.WithRootRoute("GET /metrics", m), server.WithMiddleware(m.Count), server.WithRoute("GET /v1/reach", server.ReachHandler(d.backend))}
	if d.policy != nil {
		opts = append(opts, server.WithSpecPolicy(d.policy), server.WithShares(cfg.PeerShares))
	}
	d.srv = server.New(d.backend, server.PeerPolicy(lookupGroup(cfg.SocketGroup)), d.log.Named("api"), append(opts,
		// Profiles, for root's equals: a confined caller would read the
		// whole daemon, and hold the one CPU profiler.
		server.WithRootRoute("GET /debug/pprof/", http.HandlerFunc(pprof.Index)),
		server.WithRootRoute("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile)),
		server.WithRootRoute("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace)))...)
	return nil
}

// serve runs the workloads directory's watcher and the API until a
// signal, ctx's end or the API's failure, then stops them: the API first,
// so that nothing changes while the workloads are released (or stopped)
// and their state flushed by the closers.
func (d *run) serve() error {
	cfg, log := d.cfg, d.log
	watchCtx, stopWatching := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- d.wd.Run(watchCtx) }()
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.srv.Serve(serveCtx, d.l) }()
	log.Info("flyd daemon ready", zap.String("version", cfg.Version), zap.String("socket", cfg.Socket),
		zap.String("state_dir", cfg.StateDir), zap.String("run_dir", cfg.RunDir))
	notify("READY=1\nMAINPID=" + strconv.Itoa(os.Getpid()))
	reportCapacity(log)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	var serveErr error
	select {
	case s := <-sigs:
		log.Info("shutting down", zap.String("signal", s.String()), zap.Bool("stop_workloads", cfg.StopOnExit))
	case <-d.ctx.Done():
		log.Info("shutting down", zap.Bool("stop_workloads", cfg.StopOnExit))
	case serveErr = <-served:
		log.Error("API server failed", zap.Error(serveErr))
	}
	notify("STOPPING=1")
	// Before the API stops: the holds it cuts are no clients gone.
	d.backend.Close()
	stopServing()
	if serveErr == nil {
		<-served
	}
	stopWatching()
	<-watched
	// What is left closes in the reverse of its opening: the supervisor
	// (releasing or stopping the workloads), the plane, the pipes, the
	// runtimes, the cgroups, the registry, the state.
	d.served = true
	return serveErr
}

// lockInstance makes sure one daemon at a time owns a socket and a state
// dir. The lock dies with the process, so a killed daemon never blocks the
// next one.
func lockInstance(cfg Config) (func(), error) {
	var files []*os.File
	release := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, p := range []struct{ path, what string }{
		{cfg.Socket + ".lock", "socket " + cfg.Socket},
		{filepath.Join(cfg.StateDir, "flyd.lock"), "state dir " + cfg.StateDir},
	} {
		// Never through a symlink: one planted at the lock's path would
		// have the daemon truncate whatever it points at.
		f, err := os.OpenFile(p.path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			release()
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			holder, _ := os.ReadFile(p.path)
			f.Close()
			release()
			return nil, fmt.Errorf("another flyd daemon (pid %s) is using %s", trimPID(holder), p.what)
		}
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		files = append(files, f)
	}
	return release, nil
}

func trimPID(b []byte) string {
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	if s == "" {
		return "unknown"
	}
	return s
}

// listen creates the API socket, replacing a stale one (the instance lock
// proves no daemon serves it). It is 0660 and owned by the socket group
// when that group exists, else 0600; the mode is set through the umask so
// the socket is never reachable with looser permissions.
func listen(path, group string, log *zap.Logger) (net.Listener, error) {
	if err := os.Remove(path); err == nil {
		log.Info("removed a stale socket", zap.String("socket", path))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	gid := lookupGroup(group)
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
	}
	old := unix.Umask(0o777 &^ int(mode))
	l, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if gid >= 0 {
		// The socket's directory is trusted (trust.Dir), so the path
		// names the socket just made; Lchown never follows a symlink.
		if err := os.Lchown(path, -1, gid); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func lookupGroup(name string) int {
	if name == "" {
		return -1
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return -1
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return -1
	}
	return gid
}

// notify sends a state to systemd when it asked for notifications.
func notify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}
