package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/flyd-dev/flyd/api/server"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/daemon"
	ctrdriver "github.com/flyd-dev/flyd/driver/containerd"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.Register("daemon", "run the daemon in the foreground", "[flags]", cmdDaemon)
}

type daemonConfig struct {
	config      string
	socket      string
	socketGroup string
	peerUsers   string
	// The shares of a caller other than root: workloads, and sizes.
	peerMaxWorkloads                               int
	peerMaxSpecBytes, peerMaxBody, peerMaxLogBytes string
	stateDir                                       string
	runDir                                         string
	logLevel                                       string
	stopOnExit                                     bool
	publishAtConnect                               bool
	logMaxSize                                     string
	logGens                                        int
	advertise                                      string
	networkPool                                    string
	reachHost                                      string

	cgroupParent    string
	containerdSock  string
	workloadsDir    string
	registry        string
	registryKeyFile string
	registryCA      string
	registryListen  string
	registryTLSCert string
	registryTLSKey  string
}

func daemonFlags(cfg *daemonConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	home := cli.Home()
	fs.StringVar(&cfg.config, "config", home.Config, "config file; its keys are these flags' names (absent file = defaults)")
	fs.StringVar(&cfg.socket, "socket", home.Socket, "API socket")
	fs.StringVar(&cfg.socketGroup, "socket-group", "flyd", "group whose members may use the socket: root-equivalent unless --peer-users limits them")
	fs.StringVar(&cfg.peerUsers, "peer-users", "", "the users (names or uids, comma-separated) that may be peers: a caller other than root runs only native workloads, as itself, and only if named here")
	sh := server.DefaultShares
	fs.IntVar(&cfg.peerMaxWorkloads, "peer-max-workloads", sh.Workloads, "with --peer-users: the workloads one caller other than root holds at most, each replica one")
	fs.StringVar(&cfg.peerMaxSpecBytes, "peer-max-spec-bytes", sizeFlag(sh.SpecBytes), "with --peer-users: the bytes of the specs (JSON, as inspect shows them) of one caller other than root's workloads at most")
	fs.StringVar(&cfg.peerMaxBody, "peer-max-body", sizeFlag(sh.Body), "with --peer-users: a request body of a caller other than root, a project's too, at most; a longer one is refused before it is read")
	fs.StringVar(&cfg.peerMaxLogBytes, "peer-max-log-bytes", sizeFlag(sh.LogBytes), "with --peer-users: the log files of one caller other than root's workloads on disk in all; each of its workloads' logs keeps this divided by --peer-max-workloads")
	fs.StringVar(&cfg.stateDir, "state-dir", home.StateDir, "specs and logs")
	fs.StringVar(&cfg.runDir, "run-dir", home.RunDir, "runtime state")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.logMaxSize, "log-max-size", "10Mi", "rotate a workload's log file at this size")
	fs.IntVar(&cfg.logGens, "log-generations", logfile.DefaultGenerations, "rotated log files kept per workload")
	fs.StringVar(&cfg.workloadsDir, "workloads-dir", home.WorkloadsDir, "spec files applied and watched; a workload created by a file changes only through it")
	fs.StringVar(&cfg.containerdSock, "containerd-socket", ctrdriver.DefaultSocket, "the containerd daemon that runs kind containerd")
	fs.StringVar(&cfg.cgroupParent, "cgroup-parent", "", "the cgroup, under each hierarchy's root, that holds one cgroup per workload (default flyd for the default run dir, flyd-HASH of the run dir otherwise)")
	fs.StringVar(&cfg.registry, "registry", "embedded", "embedded, off, or the base URL of a registry (http://host:port), or of its replicas, comma-separated")
	fs.StringVar(&cfg.registryKeyFile, "registry-key-file", "", "the registry's API key (default <state-dir>/registry.key, created 0600 when embedded)")
	fs.StringVar(&cfg.registryCA, "registry-ca", "", "the CA certificates (PEM) that signed an HTTPS registry's certificate (default: the system's)")
	fs.StringVar(&cfg.registryListen, "registry-listen", "", "where the embedded registry listens (default 127.0.0.1:9471 for the default run dir, a port hashed from the run dir above it otherwise)")
	fs.StringVar(&cfg.registryTLSCert, "registry-tls-cert", "", "serve the embedded registry on HTTPS with this certificate (PEM, the chain after it); the registrar trusts it through --registry-ca or the system's CAs")
	fs.StringVar(&cfg.registryTLSKey, "registry-tls-key", "", "the --registry-tls-cert's private key (PEM)")
	fs.StringVar(&cfg.advertise, "advertise-address", "127.0.0.1", "address published as the public instance of host-network endpoints")
	fs.StringVar(&cfg.networkPool, "network-pool", daemon.DefaultNetworkPool, "IPv4 prefix the isolated networks' links take a /30 each from; off leaves them islands with only loopback")
	fs.StringVar(&cfg.reachHost, "reach-host", "off", "declared: an endpoint on the host's network admits only its own workload, the workloads that use it and every process that is no workload; off admits all")
	fs.BoolVar(&cfg.stopOnExit, "stop-workloads-on-exit", false, "stop every workload when the daemon exits instead of leaving them running")
	fs.BoolVar(&cfg.publishAtConnect, "publish-at-connect", true, "take the host's own clients of a published port to its network once, at connect() (BPF), beside nftables' DNAT; false leaves them to nftables alone")
	return fs
}

func cmdDaemon(ctx context.Context, c *cli.Env, args []string) error {
	// Workloads start with login's open files limit, not the daemon's:
	// on the main thread (main.go), whose parent-death signal an exec
	// keeps.
	err := native.StartWithLoginFiles(os.Args)
	runtime.UnlockOSThread()
	if err != nil {
		fmt.Fprintf(c.Stderr, "flyd daemon: workloads start with the daemon's open files limit: %v\n", err)
	}
	var cfg daemonConfig
	fs := daemonFlags(&cfg)
	fs.SetOutput(c.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := applyConfigFile(fs, cfg.config); err != nil {
		return err
	}
	if _, err := spec.ParseSize(cfg.logMaxSize); err != nil || cfg.logGens < 1 {
		return cli.Usagef("--log-max-size must be a size like 10Mi and --log-generations at least 1")
	}
	if _, err := server.PeerUsersPolicy(cfg.peerUsers); err != nil {
		return cli.Usage(err)
	}
	shares, err := cfg.shares()
	if err != nil {
		return cli.Usage(err)
	}
	switch {
	case (cfg.registryTLSCert == "") != (cfg.registryTLSKey == ""):
		return cli.Usagef("--registry-tls-cert and --registry-tls-key go together")
	case cfg.registryTLSCert != "" && cfg.registry != "embedded":
		return cli.Usagef("--registry-tls-cert is for the embedded registry (--registry embedded); another registry serves its own certificate")
	}
	log, err := newLogger(cfg.logLevel)
	if err != nil {
		return cli.Usage(err)
	}
	defer log.Sync()
	maxSize, _ := spec.ParseSize(cfg.logMaxSize)
	return daemon.Run(ctx, daemon.Config{
		Socket: cfg.socket, SocketGroup: cfg.socketGroup, PeerUsers: cfg.peerUsers, PeerShares: shares,
		StateDir: cfg.stateDir, RunDir: cfg.runDir, WorkloadsDir: cfg.workloadsDir, StopOnExit: cfg.stopOnExit,
		LogMaxSize: int64(maxSize), LogGenerations: cfg.logGens, AdvertiseAddress: cfg.advertise,
		NetworkPool: cfg.networkPool, ReachHost: cfg.reachHost, CgroupParent: cfg.cgroupParent, ContainerdSocket: cfg.containerdSock,
		Registry: cfg.registry, RegistryKeyFile: cfg.registryKeyFile, RegistryCA: cfg.registryCA, RegistryListen: cfg.registryListen,
		RegistryTLSCert: cfg.registryTLSCert, RegistryTLSKey: cfg.registryTLSKey,
		NoPublishAtConnect: !cfg.publishAtConnect, Version: cli.Version,
	}, log)
}

// shares reads the --peer-max-… flags.
func (cfg *daemonConfig) shares() (server.Shares, error) {
	sh := server.Shares{Workloads: cfg.peerMaxWorkloads}
	for _, f := range []struct {
		name, v string
		to      *int64
	}{{"peer-max-spec-bytes", cfg.peerMaxSpecBytes, &sh.SpecBytes}, {"peer-max-body", cfg.peerMaxBody, &sh.Body}, {"peer-max-log-bytes", cfg.peerMaxLogBytes, &sh.LogBytes}} {
		n, err := spec.ParseSize(f.v)
		if err != nil {
			return sh, fmt.Errorf("--%s: %q is not a size like 4Mi: %w", f.name, f.v, err)
		}
		*f.to = int64(n)
	}
	return sh, sh.Check()
}

// sizeFlag writes a default size as the flags take it.
func sizeFlag(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGi", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMi", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKi", n>>10)
	}
	return fmt.Sprint(n)
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	zc.EncoderConfig.TimeKey = "time"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}
