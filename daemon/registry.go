package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
	"github.com/flyd-dev/flyd/status"
)

// daemonRegistry is the daemon's side of the registry: the embedded
// reference registry when it runs one, and the registrar that heart-beats
// into whichever registry is configured.
type daemonRegistry struct {
	url, keyFile string
	registrar    *registrar.Registrar
	client       *registryclient.Client
	ctx          context.Context // the registrar's run
	stop         []func()
}

// daemonLabel is the registrar.DaemonLabel of this daemon: the same
// across its restarts (its host's name and its state dir), and another
// for a daemon beside it, which has a state dir of its own.
func daemonLabel(stateDir string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(host + "\x00" + stateDir))
	return hex.EncodeToString(sum[:8])
}

// startRegistry sets up --registry: "off", "embedded" (a reference registry
// in this process, its key created 0600 when missing) or base URLs: one
// registry's replicas, comma-separated, which the client fails over
// between.
func startRegistry(ctx context.Context, cfg Config, log *zap.Logger, onError func(owner, id string, err error)) (*daemonRegistry, error) {
	d := &daemonRegistry{}
	if cfg.Registry == "off" {
		return d, nil
	}
	keyFile := cfg.RegistryKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(cfg.StateDir, "registry.key")
	}
	d.url, d.keyFile = cfg.Registry, keyFile
	if cfg.Registry != "embedded" && (cfg.RegistryTLSCert != "" || cfg.RegistryTLSKey != "") {
		return nil, errors.New("a TLS certificate for the registry is for the embedded one (--registry embedded); another registry serves its own")
	}
	var opts []registryclient.Option
	var roots *x509.CertPool // nil: the system's
	if cfg.RegistryCA != "" {
		// A registry on HTTPS whose certificate a CA of one's own signed.
		tc, err := registryclient.CAFile(cfg.RegistryCA)
		if err != nil {
			return nil, err
		}
		opts, roots = append(opts, registryclient.WithTLS(tc)), tc.RootCAs
	}
	if cfg.Registry == "embedded" {
		key, created, err := registry.LoadOrCreateKey(keyFile)
		if err != nil {
			return nil, fmt.Errorf("registry key: %w", err)
		}
		if created {
			log.Info("created the registry key file", zap.String("file", keyFile))
		}
		srv, err := registry.New(registry.Config{
			DefaultTTL:   registry.DefaultTTL,
			SnapshotPath: filepath.Join(cfg.StateDir, "registry.json"),
			Key:          key,
			Logger:       log.Named("registry"),
		})
		if err != nil {
			return nil, err
		}
		if cfg.RegistryTLSCert != "" || cfg.RegistryTLSKey != "" {
			if _, err := registry.ServerTLS(cfg.RegistryTLSCert, cfg.RegistryTLSKey); err != nil {
				return nil, fmt.Errorf("embedded registry: %w", err)
			}
		}
		l, url, err := listenEmbedded(cfg, log)
		if err != nil {
			return nil, fmt.Errorf("embedded registry: %w", err)
		}
		if cfg.RegistryTLSCert != "" {
			// The registrar below connects to it: it must trust it.
			u, err := neturl.Parse(url)
			if err == nil {
				err = registry.VerifyServed(cfg.RegistryTLSCert, cfg.RegistryTLSKey, roots, u.Hostname())
			}
			if err != nil {
				l.Close()
				return nil, fmt.Errorf("embedded registry: %w (give --registry-ca the CA that signed it)", err)
			}
		}
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(sctx, l); err != nil {
				log.Error("embedded registry stopped", zap.Error(err))
			}
		}()
		d.stop = append(d.stop, func() { cancel(); <-done })
		d.url = url
	}
	client, err := registryclient.New(d.url, keyFile, opts...)
	if err != nil {
		d.close()
		return nil, err
	}
	d.client = client
	d.registrar = registrar.New(registrar.Config{Registry: client, Logger: log.Named("registrar"), OnError: onError,
		Daemon: daemonLabel(cfg.StateDir)})
	rctx, cancel := context.WithCancel(ctx)
	d.ctx = rctx
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.registrar.Run(rctx)
	}()
	// Stopped before the embedded server so no heartbeat meets a closed door.
	d.stop = append([]func(){func() { cancel(); <-done; client.Close() }}, d.stop...)
	return d, nil
}

// listenEmbedded listens for the embedded registry on --registry-listen,
// or, when something else holds that port (another daemon, or any local
// user who bound it first), on a port the kernel chooses on the same
// address: the daemon starts whatever holds the port, and its registrar,
// `flyd status` and `flyd registry ls` follow the registry where it is.
// Another error (an address this host does not have, a bad certificate)
// stops the daemon: it is the configuration's.
func listenEmbedded(cfg Config, log *zap.Logger) (net.Listener, string, error) {
	l, url, err := registry.Listen(cfg.RegistryListen, cfg.RegistryTLSCert, cfg.RegistryTLSKey)
	if !errors.Is(err, syscall.EADDRINUSE) {
		return l, url, err
	}
	host, _, serr := net.SplitHostPort(cfg.RegistryListen)
	if serr != nil {
		return nil, "", err
	}
	l, url, err2 := registry.Listen(net.JoinHostPort(host, "0"), cfg.RegistryTLSCert, cfg.RegistryTLSKey)
	if err2 != nil {
		return nil, "", fmt.Errorf("%w, and no other port either: %w", err, err2)
	}
	log.Warn("embedded registry: the port of --registry-listen is taken by another process; it listens on another, which flyd status shows (free the port and restart the daemon to have it back)",
		zap.String("registry_listen", cfg.RegistryListen), zap.String("url", url))
	return l, url, nil
}

// sweep deregisters, in the background, what an earlier run of this
// daemon left registered for workloads that are no more, or at rest
// (stopped, exited, failed): a daemon killed during a down or a stop
// never sent those deregisters. workloads is every workload the daemon
// has, as it restored them.
func (d *daemonRegistry) sweep(workloads func() []status.Workload, log *zap.Logger) {
	if d.registrar == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
		defer cancel()
		live := map[string]bool{}
		for _, w := range workloads() {
			switch w.State {
			case status.Stopped, status.Exited, status.Failed:
			default:
				live[w.Name] = true
			}
		}
		n, err := d.registrar.Sweep(ctx, func(in registryclient.Instance) bool { return live[in.Metadata["flyd.workload"]] })
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("registry: cannot tell what an earlier run left registered; its leases lapse on their own", zap.Error(err))
		case n > 0:
			log.Info("registry: deregistering the instances an earlier run left of workloads gone or at rest", zap.Int("instances", n))
		}
	}()
}

// flush deregisters everything still registered, for a daemon that stops
// its workloads on exit.
func (d *daemonRegistry) flush(log *zap.Logger) {
	if d.registrar == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.registrar.Flush(ctx); err != nil {
		log.Warn("could not deregister every instance", zap.Error(err))
	}
}

func (d *daemonRegistry) close() {
	for _, f := range d.stop {
		f()
	}
	d.stop = nil
}
