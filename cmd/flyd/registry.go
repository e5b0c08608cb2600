package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// Where `flyd registry serve` listens and keeps its key unless told
// otherwise, and so where `flyd registry ls` looks.
const (
	defaultRegistryURL     = "http://127.0.0.1:9471"
	defaultRegistryListen  = "127.0.0.1:9471"
	defaultRegistryKeyFile = "/var/lib/flyd/registry.key"
)

const (
	registryServeUsage = "serve [--listen ADDR] [--key-file F] [--default-ttl 90s] [--reap-interval 30s] [--snapshot FILE] [--log-level L]\n" +
		"             [--store memory|etcd --etcd-endpoints URL,... [--etcd-prefix P] [--etcd-timeout 2s] [--etcd-cacert F --etcd-cert F --etcd-key F]]"
	registryLsUsage = "ls [--registry URL] [--registry-key-file F] [--healthy-only] [--json] [--socket S]"
)

func init() {
	register("registry", command{"run or query a service registry", registryServeUsage + "\n       flyd registry " + registryLsUsage, cmdRegistry})
}

func cmdRegistry(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return usagef("name a subcommand: serve or ls")
	}
	switch args[0] {
	case "serve":
		c.usage = registryServeUsage
		return registryServe(ctx, c, args[1:])
	case "ls":
		c.usage = registryLsUsage
		return registryLs(ctx, c, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(c.stderr, "usage: flyd registry %s\n       flyd registry %s\n", registryServeUsage, registryLsUsage)
		return flag.ErrHelp
	}
	return usagef("unknown subcommand %q: serve or ls", args[0])
}

// registryFlags is a flag set for a registry subcommand: they take none of
// the daemon client's flags (--socket).
func registryFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("registry "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func registryServe(ctx context.Context, c *cli, args []string) error {
	fs := registryFlags("serve")
	listen := fs.String("listen", defaultRegistryListen, "address to listen on (host:port)")
	keyFile := fs.String("key-file", defaultRegistryKeyFile, "file holding the API key; created (0600, random) when absent")
	defTTL := fs.Duration("default-ttl", registry.DefaultTTL, "lease of instances registered without a ttl_ns; 0 = never expire")
	reap := fs.Duration("reap-interval", registry.DefaultReapInterval, "how often expired instances are removed")
	snapshot := fs.String("snapshot", "", "file keeping the state across restarts (default: memory only)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	var ef etcdFlags
	ef.add(fs)
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case *defTTL < 0:
		return usagef("--default-ttl must not be negative")
	case *reap <= 0:
		return usagef("--reap-interval must be positive")
	}
	if err := ef.check(fs); err != nil {
		return err
	}
	log, err := newLogger(*level)
	if err != nil {
		return usagef("--log-level: %v", err)
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
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log.Info("registry listening", zap.String("addr", l.Addr().String()), zap.String("key_file", *keyFile),
		zap.Stringer("default_ttl", *defTTL), zap.String("store", ef.store), zap.Stringer("reap_interval", *reap), zap.String("snapshot", *snapshot))
	err = srv.Serve(ctx, l)
	if err != nil {
		log.Error("registry stopped", zap.Error(err))
		return err
	}
	log.Info("registry stopped")
	return nil
}

func registryLs(ctx context.Context, c *cli, args []string) error {
	fs := c.flags()
	url := fs.String("registry", "", "registry URL (default: the one the daemon uses)")
	keyFile := fs.String("registry-key-file", "", "file holding the registry's API key (default: the daemon's)")
	healthy := fs.Bool("healthy-only", false, "only the healthy instances")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *url == "" || *keyFile == "" {
		if err := c.daemonRegistry(ctx, url, keyFile); err != nil {
			return err
		}
	}
	rc, err := registryclient.New(*url, *keyFile)
	if err != nil {
		return err
	}
	defer rc.Close()
	ins, err := rc.Instances(ctx, *healthy)
	if err != nil {
		if errors.Is(err, registryclient.ErrUnauthorized) {
			return fmt.Errorf("%w (is --registry-key-file the registry's key?)", err)
		}
		return err
	}
	if c.json {
		if ins == nil {
			ins = []registryclient.Instance{}
		}
		return printJSON(c.stdout, ins)
	}
	printInstances(c.stdout, ins, time.Now())
	return nil
}

func printInstances(w io.Writer, ins []registryclient.Instance, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tPORT\tHEALTHY\tTTL\tAGE\tID")
	for _, in := range ins {
		ttl := "never"
		if in.TTL > 0 {
			ttl = time.Duration(in.TTL).String()
		}
		age := "-"
		if !in.RegisteredAt.IsZero() {
			age = now.Sub(in.RegisteredAt).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", in.Name, in.Address, strconv.Itoa(in.Port),
			in.Healthy, ttl, age, in.ID)
	}
	tw.Flush()
}

// daemonRegistry fills in the registry URL and key file the daemon uses
// where the flags leave them out. Without a daemon answering, the defaults
// of `flyd registry serve` stand.
func (c *cli) daemonRegistry(ctx context.Context, url, keyFile *string) error {
	st, err := c.client.Status(ctx)
	if err != nil {
		*url = cmp.Or(*url, defaultRegistryURL)
		*keyFile = cmp.Or(*keyFile, defaultRegistryKeyFile)
		return nil
	}
	if st.Registry.URL == "" && *url == "" {
		return fmt.Errorf("the daemon on %s registers into no registry (--registry off); name one with --registry", c.socket)
	}
	*url = cmp.Or(*url, st.Registry.URL)
	*keyFile = cmp.Or(*keyFile, st.Registry.KeyFile, defaultRegistryKeyFile)
	return nil
}
