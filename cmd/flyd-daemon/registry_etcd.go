package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/registry"
)

// etcdFlags are the flags of `flyd registry serve --store etcd`, named as
// etcdctl names them.
type etcdFlags struct {
	store                string
	endpoints            string
	prefix               string
	timeout              time.Duration
	cacert, cert, keyPEM string
}

func (f *etcdFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "store", "memory", "where the instances live: memory (one process, --snapshot) or etcd (replicas share an etcd cluster)")
	fs.StringVar(&f.endpoints, "etcd-endpoints", "", "with --store etcd: the cluster's client URLs, comma-separated")
	fs.StringVar(&f.prefix, "etcd-prefix", registry.DefaultEtcdPrefix, "with --store etcd: the key prefix of the instances")
	fs.DurationVar(&f.timeout, "etcd-timeout", registry.DefaultEtcdTimeout, "with --store etcd: how long a request may wait for etcd before answering 503")
	fs.StringVar(&f.cacert, "etcd-cacert", "", "with --store etcd: CA bundle that signed the members' certificates")
	fs.StringVar(&f.cert, "etcd-cert", "", "with --store etcd: client certificate for etcd")
	fs.StringVar(&f.keyPEM, "etcd-key", "", "with --store etcd: the client certificate's key")
}

// check refuses flags that do not go together, naming them.
func (f *etcdFlags) check(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch f.store {
	case "memory":
		for _, n := range []string{"etcd-endpoints", "etcd-prefix", "etcd-timeout", "etcd-cacert", "etcd-cert", "etcd-key"} {
			if set[n] {
				return cli.Usagef("--%s is for --store etcd", n)
			}
		}
		return nil
	case "etcd":
	default:
		return cli.Usagef("--store %q: memory or etcd", f.store)
	}
	switch {
	case strings.TrimSpace(f.endpoints) == "":
		return cli.Usagef("--store etcd needs --etcd-endpoints URL[,URL...]")
	case set["snapshot"]:
		return cli.Usagef("--snapshot is for --store memory: etcd keeps the state")
	case set["reap-interval"]:
		return cli.Usagef("--reap-interval is for --store memory: etcd's lease expiry is the reaper")
	case f.timeout <= 0:
		return cli.Usagef("--etcd-timeout must be positive")
	case (f.cert == "") != (f.keyPEM == ""):
		return cli.Usagef("--etcd-cert and --etcd-key go together")
	}
	return nil
}

// open returns the store the flags name: nil (the server's in-memory one)
// or an etcd store, which refuses to open on a cluster that does not answer.
func (f *etcdFlags) open(ctx context.Context, log *zap.Logger) (registry.Store, func(), error) {
	if f.store != "etcd" {
		return nil, func() {}, nil
	}
	var eps []string
	for _, ep := range strings.Split(f.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	tc, err := f.tls()
	if err != nil {
		return nil, nil, err
	}
	st, err := registry.OpenEtcd(ctx, registry.EtcdConfig{
		Endpoints: eps, Prefix: f.prefix, TLS: tc, Timeout: f.timeout, Logger: log.Named("etcd"),
	})
	if err != nil {
		return nil, nil, err
	}
	log.Info("registry store: etcd", zap.Strings("endpoints", eps), zap.String("prefix", st.Prefix()))
	return st, func() { st.Close() }, nil
}

func (f *etcdFlags) tls() (*tls.Config, error) {
	if f.cacert == "" && f.cert == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.cacert != "" {
		pem, err := os.ReadFile(f.cacert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", f.cacert)
		}
	}
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
