package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

const registryServeUsage = "serve [--listen ADDR] [--key-file F] [--tls-cert F --tls-key F] [--default-ttl 90s] [--reap-interval 30s] [--snapshot FILE] [--log-level L]\n" +
	"             [--store memory|etcd --etcd-endpoints URL,... [--etcd-prefix P] [--etcd-timeout 2s] [--etcd-cacert F --etcd-cert F --etcd-key F]]"

func init() {
	cli.Register("registry", "run or query a service registry", registryServeUsage+"\n       flyd registry "+registryLsUsage+"\n       flyd registry "+registryDriftUsage, cmdRegistry)
}

// cmdRegistry is every `flyd registry` command: serving a registry, and
// querying one, whose client (TLS, TOML references) the CLI does not link.
func cmdRegistry(ctx context.Context, c *cli.Env, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("name a subcommand: serve, ls or drift")
	}
	switch args[0] {
	case "serve":
		return registryServe(ctx, c, args[1:])
	case "ls":
		c.Usage = registryLsUsage
		return registryLs(ctx, c, args[1:])
	case "drift":
		c.Usage = registryDriftUsage
		return registryDrift(ctx, c, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(c.Stderr, "usage: flyd registry %s\n       flyd registry %s\n       flyd registry %s\n", registryServeUsage, registryLsUsage, registryDriftUsage)
		return flag.ErrHelp
	}
	return cli.Usagef("unknown subcommand %q: serve, ls or drift", args[0])
}

// registryFlags is a flag set for a registry subcommand: they take none of
// the daemon client's flags (--socket).
func registryFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("registry "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func registryServe(ctx context.Context, c *cli.Env, args []string) error {
	fs := registryFlags("serve")
	listen := fs.String("listen", registryclient.DefaultListen, "address to listen on (host:port)")
	keyFile := fs.String("key-file", registryclient.DefaultKeyFile, "file holding the API key; created (0600, random) when absent")
	defTTL := fs.Duration("default-ttl", registry.DefaultTTL, "lease of instances registered without a ttl_ns; 0 = never expire")
	reap := fs.Duration("reap-interval", registry.DefaultReapInterval, "how often expired instances are removed")
	snapshot := fs.String("snapshot", "", "file keeping the state across restarts (default: memory only)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM, the chain after it)")
	tlsKey := fs.String("tls-key", "", "the --tls-cert's private key (PEM)")
	var ef etcdFlags
	ef.add(fs)
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return cli.Usagef("unexpected argument %q", pos[0])
	case *defTTL < 0:
		return cli.Usagef("--default-ttl must not be negative")
	case *reap <= 0:
		return cli.Usagef("--reap-interval must be positive")
	case (*tlsCert == "") != (*tlsKey == ""):
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	if *tlsCert != "" {
		// Read now: a wrong file is a usage error before anything starts.
		if _, err := registry.ServerTLS(*tlsCert, *tlsKey); err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	if err := ef.check(fs); err != nil {
		return err
	}
	log, err := newLogger(*level)
	if err != nil {
		return cli.Usagef("--log-level: %v", err)
	}
	defer log.Sync()
	store, closeStore, err := ef.open(ctx, log)
	if err != nil {
		return err
	}
	defer closeStore()

	key, created, err := registry.LoadOrCreateKey(*keyFile)
	if err != nil {
		return err
	}
	if created {
		log.Info("created a new registry key file", zap.String("key_file", *keyFile))
	}
	srv, err := registry.New(registry.Config{
		DefaultTTL:   *defTTL,
		Store:        store,
		ReapInterval: *reap,
		SnapshotPath: *snapshot,
		Key:          key,
		Logger:       log.Named("registry"),
	})
	if err != nil {
		return err
	}
	l, url, err := registry.Listen(*listen, *tlsCert, *tlsKey)
	if err != nil {
		return err
	}
	log.Info("registry listening", zap.String("addr", l.Addr().String()), zap.String("url", url), zap.String("key_file", *keyFile),
		zap.Stringer("default_ttl", *defTTL), zap.String("store", ef.store), zap.Stringer("reap_interval", *reap), zap.String("snapshot", *snapshot))
	err = srv.Serve(ctx, l)
	if err != nil {
		log.Error("registry stopped", zap.Error(err))
		return err
	}
	log.Info("registry stopped")
	return nil
}
