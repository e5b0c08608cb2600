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
	"github.com/flyd-dev/flyd/internal/instance"
	"github.com/flyd-dev/flyd/internal/trust"
	"github.com/flyd-dev/flyd/metrics"
	"github.com/flyd-dev/flyd/reaper"
	"github.com/flyd-dev/flyd/sandbox"
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
	LogMaxSize       int64
	LogGenerations   int
	AdvertiseAddress string
	NetworkPool      string
	ReachHost        string // declared or off (empty): the host network's reach
	CgroupParent     string // empty: named after the run dir
	ContainerdSocket string
	Registry         string
	RegistryKeyFile  string
	RegistryCA       string // the CA (PEM) that signed an HTTPS registry's certificate; empty: the system's
	RegistryListen   string // empty: named after the run dir
	Version          string

	// RegistryTLSCert and RegistryTLSKey serve the embedded registry on
	// HTTPS: its certificate (PEM, the chain after it) and key. Empty:
	// plain HTTP.
	RegistryTLSCert, RegistryTLSKey string
}

// Run runs the daemon until SIGTERM, SIGINT or ctx's end.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	// Descriptors the daemon inherited (a CI runner's pipe, a shell's
	// fds) must not reach workloads, which would hold them open long after
	// the daemon is gone. Go sets close-on-exec on its own descriptors only.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		log.Warn("cannot mark inherited descriptors close-on-exec", zap.Error(err))
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
	for _, d := range dirs {
		real, err := trust.Dir(d.what, *d.path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(real, d.mode); err != nil {
			return err
		}
		if *d.path, err = trust.Dir(d.what, real); err != nil {
			return err
		}
	}
	cfg.Socket = filepath.Join(sockDir, filepath.Base(cfg.Socket))
	// What the daemon makes in the host's shared namespaces is named after
	// its run dir, so that daemons side by side never meet there.
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = instance.Name(cfg.RunDir)
	}
	if cfg.RegistryListen == "" {
		cfg.RegistryListen = instance.RegistryListen(cfg.RunDir)
	}
	policy, err := server.PeerUsersPolicy(cfg.PeerUsers)
	if err != nil {
		return err
	}
	if cfg.PeerShares == (server.Shares{}) {
		cfg.PeerShares = server.DefaultShares
	}
	if err := cfg.PeerShares.Check(); err != nil {
		return err
	}
	unlock, err := lockInstance(cfg)
	if err != nil {
		return err
	}
	defer unlock()
	reapCtx, stopReaping := context.WithCancel(context.Background())
	defer stopReaping()
	if err := reaper.Become(reapCtx); err != nil {
		log.Warn("cannot become the reaper of orphaned workload processes", zap.Error(err))
	}

	l, err := listen(cfg.Socket, cfg.SocketGroup, log)
	if err != nil {
		return err
	}
	defer os.Remove(cfg.Socket)

	// Closed last: everything below reports into them or reads them.
	st, bus, err := openState(cfg, log)
	if err != nil {
		l.Close()
		return err
	}
	defer func() {
		bus.Close()
		if err := st.Close(); err != nil {
			log.Warn("closing the state journal", zap.Error(err))
		}
	}()
	publish := publisher(bus, log)
	reg, err := startRegistry(ctx, cfg, log, registryProblem(publish))
	if err != nil {
		l.Close()
		return err
	}
	defer reg.close()
	cgroups, err := sandbox.NewCgroups(cfg.CgroupParent)
	if err != nil {
		// Workloads still run, without limits and with the process group
		// as the only handle on their children.
		log.Warn("no cgroups: resources are refused and a child that leaves its session escapes stop", zap.Error(err))
		cgroups = nil
	}
	if cgroups != nil {
		// Held before anything is swept: a daemon never deletes, kills or
		// reuses the cgroups of another given the same parent.
		release, err := cgroups.Claim()
		if err != nil {
			reg.close()
			l.Close()
			return err
		}
		defer func() {
			// An empty parent goes with the daemon, however it ends, so
			// that a host without workloads keeps no cgroup of flyd's;
			// one that holds workloads stays for them and for the next
			// daemon.
			if err := cgroups.RemoveParent(); err != nil && !errors.Is(err, errdefs.ErrConflict) {
				log.Warn("cannot remove the workloads' parent cgroup", zap.Error(err))
			}
			release()
		}()
	}
	drivers, closeDrivers := runtimes(ctx, &cfg, cgroups, log)
	defer closeDrivers()
	pool, fw, err := networkLinks(cfg, log)
	if err != nil {
		l.Close()
		return err
	}
	reachHost, err := hostReach(cfg, fw, cgroups)
	if err != nil {
		l.Close()
		return err
	}
	pipes := openLogPipes(cfg.RunDir, log)
	if pipes != nil {
		defer pipes.Close() // after the supervisor's: the holder keeps the pipes
	}
	plane, err := openPlane(cfg, st, drivers, pool, fw, cgroups, reachHost, publish, log)
	if err != nil {
		l.Close()
		return err
	}
	// After the supervisor's close: the links of deleted networks go.
	defer plane.Wait()
	workspaces := workspace.Open(st, log.Named("workspaces"))
	// A project's host workloads share a /dev/shm of its own.
	shms, err := sandbox.NewShms(filepath.Join(cfg.RunDir, "shm"))
	if err != nil {
		log.Warn("projects' workloads share the host's /dev/shm", zap.Error(err))
		shms = nil
	}
	started := time.Now()
	sup, err := supervisor.New(supervisor.Config{
		Store:            st,
		Events:           bus,
		Net:              plane,
		Workspaces:       workspaces,
		LogPipes:         pipes,
		Registrar:        reg.registrar,
		LogMaxSize:       cfg.LogMaxSize,
		LogGenerations:   cfg.LogGenerations,
		StateDir:         cfg.StateDir,
		RunDir:           cfg.RunDir,
		Drivers:          drivers,
		Cgroups:          cgroups,
		Shms:             shms,
		Logger:           log,
		StopOnClose:      cfg.StopOnExit,
		AdvertiseAddress: cfg.AdvertiseAddress,
		PeerLanes:        policy != nil,
		PeerLogBytes:     cfg.PeerShares.WorkloadLogBytes(),
	})
	if err != nil {
		l.Close()
		return err
	}
	reg.sweep(func() []status.Workload { return sup.List(context.Background()) }, log)
	docs, err := documents.New(documents.Config{Owners: st.Owners(), Events: bus, Logger: log.Named("documents"), Keepers: Keepers(plane, workspaces)})
	if err != nil {
		sup.Close()
		l.Close()
		return err
	}
	wd, err := declarative.New(declarative.Config{
		Dir: cfg.WorkloadsDir, Applier: fileApplier{sup, docs}, Logger: log.Named("workloads-dir"), Events: bus,
	})
	if err != nil {
		sup.Close()
		l.Close()
		return err
	}
	gid := lookupGroup(cfg.SocketGroup)
	backend := NewBackend(sup, docs, Parts{
		Version: cfg.Version, Started: started, Events: bus, Runtimes: driver.NewRuntimes(drivers), Plane: plane, Files: wd,
		Usage:     usage.NewSampler(cgroups, func() []status.Workload { return sup.List(context.Background()) }),
		Registrar: reg.registrar, RegistryURL: reg.url, RegistryKeyFile: reg.keyFile,
		Leases: st, Publish: publish, Log: log,
	})
	m := metrics.New(backend)
	opts := []server.Option{server.WithRootRoute("GET /metrics", m), server.WithMiddleware(m.Count), server.WithRoute("GET /v1/reach", server.ReachHandler(backend))}
	if policy != nil {
		opts = append(opts, server.WithSpecPolicy(policy), server.WithShares(cfg.PeerShares))
	}
	srv := server.New(backend, server.PeerPolicy(gid), log.Named("api"), append(opts,
		// Profiles, for root's equals: a confined caller would read the
		// whole daemon, and hold the one CPU profiler.
		server.WithRootRoute("GET /debug/pprof/", http.HandlerFunc(pprof.Index)),
		server.WithRootRoute("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile)),
		server.WithRootRoute("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace)))...)

	watchCtx, stopWatching := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- wd.Run(watchCtx) }()

	// The API stops first so that nothing changes while workloads are
	// released (or stopped) and their state flushed.
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, l) }()
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
	case <-ctx.Done():
		log.Info("shutting down", zap.Bool("stop_workloads", cfg.StopOnExit))
	case serveErr = <-served:
		log.Error("API server failed", zap.Error(serveErr))
	}
	notify("STOPPING=1")
	// Before the API stops: the holds it cuts are no clients gone.
	backend.Close()
	stopServing()
	if serveErr == nil {
		<-served
	}
	stopWatching()
	<-watched
	sup.Close()
	if cfg.StopOnExit {
		reg.flush(log)
	}
	log.Info("flyd daemon stopped")
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
