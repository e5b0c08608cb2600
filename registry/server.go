// Package registry is a reference implementation of the producer side of the
// Service Registry Contract (R1–R8): an authenticated REST API that stores
// service instances under TTL leases, reaps the dead ones, and renders the
// registry as koder-service-ports.toml; beyond the contract, it announces
// (Flyd-Registry-Extensions) and serves batch heartbeats and registers and
// a stream of its changes (?watch=REV). `flyd registry serve` runs it, and
// the daemon can embed it.
//
// The state is a Store. By default it is an in-memory table, snapshotted to
// one file so that a restart keeps the leases: right for one host. The etcd
// store (EtcdStore) keeps it in an etcd cluster instead, so that several
// replicas are one registry and etcd's lease expiry is the reaper. It is not
// a DNS server (SRV answers are the producer's own business) or a health
// checker: healthy is what the registrant says.
package registry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config configures a Server. The zero DefaultTTL means leases never expire
// (static entries); callers wanting the contract's default pass DefaultTTL.
type Config struct {
	DefaultTTL time.Duration // lease of an instance without its own; 0 = never expire
	// Store holds the instances; nil is the in-memory store. Reaping and
	// snapshots are the in-memory store's: a Store of its own expires
	// leases and keeps its state itself.
	Store        Store
	ReapInterval time.Duration // how often expired instances are removed; 0 = DefaultReapInterval
	SnapshotPath string        // where the state survives restarts; "" = memory only
	Key          string        // the X-API-Key every request must carry
	Logger       *zap.Logger   // nil = no logs
	Now          func() time.Time
}

// Server is a registry. Its handler may serve requests concurrently.
type Server struct {
	cfg     Config
	log     *zap.Logger
	now     func() time.Time
	keyHash [sha256.Size]byte
	store   Store
	mem     *memStore // the store when it is the in-memory one, else nil
	handler http.Handler

	// dirty asks the snapshot loop for a write soon: the set of instances
	// changed. leasesDirty only says that some updated_at moved, which
	// can wait longer (see snapshot.go): set by heartbeats, cleared by the
	// snapshot loop before it reads the store; it guards nothing else.
	dirty       chan struct{}
	leasesDirty atomic.Bool

	// closing is done when Serve stops: the watches end, so that they
	// do not hold the shutdown up.
	closing   context.Context
	stopWatch context.CancelFunc
}

// New returns a server with the state of cfg.SnapshotPath when that file
// exists; instances whose lease passed while the registry was down are
// reaped at once.
func New(cfg Config) (*Server, error) {
	if cfg.Key == "" {
		return nil, errors.New("registry: an API key is required: the registry never serves unauthenticated")
	}
	if cfg.DefaultTTL < 0 || cfg.ReapInterval < 0 {
		return nil, errors.New("registry: the default TTL and the reap interval must not be negative")
	}
	if cfg.Store != nil && cfg.SnapshotPath != "" {
		return nil, errors.New("registry: a snapshot is for the in-memory store: an external store keeps its own state")
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = DefaultReapInterval
	}
	keyHash := sha256.Sum256([]byte(cfg.Key))
	cfg.Key = "" // the hash is all the server needs: no second copy of the key
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		keyHash: keyHash,
		store:   cfg.Store,
		dirty:   make(chan struct{}, 1),
	}
	s.closing, s.stopWatch = context.WithCancel(context.Background())
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.store == nil {
		s.mem = newMemStore(s.now)
		s.store = s.mem
	}
	if cfg.SnapshotPath != "" {
		f, found, err := readSnapshot(cfg.SnapshotPath)
		if err != nil {
			return nil, err
		}
		if found {
			s.mem.load(f)
			s.log.Info("registry state loaded", zap.String("snapshot", cfg.SnapshotPath), zap.Int("instances", len(f.Instances)),
				zap.Int64("rev", f.Rev), zap.Bool("clean", f.Clean))
			s.Reap(s.now()) // what expired while the registry was down
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Handler serves the REST API (R7). It does not reap or snapshot on its own:
// Serve does, or a caller that mounts the handler elsewhere calls Reap.
func (s *Server) Handler() http.Handler { return s.handler }

// Reap removes the instances whose lease has passed at now and returns how
// many it removed. With a Store of its own it does nothing: that store
// expires leases itself, and a second reaper could only disagree with it.
func (s *Server) Reap(now time.Time) int {
	if s.mem == nil {
		return 0
	}
	gone := s.mem.reap(now)
	for _, in := range gone {
		s.log.Info("instance expired", zap.String("id", in.ID), zap.String("name", in.Name),
			zap.Time("updated_at", in.UpdatedAt), zap.Stringer("ttl", time.Duration(in.TTL)))
	}
	if len(gone) > 0 {
		s.changed()
	}
	return len(gone)
}

// Serve serves on l until ctx is done, reaping every ReapInterval and
// snapshotting after changes. When ctx is done it stops accepting, lets the
// requests in flight finish (5 s at most), and writes a final snapshot.
// A Server is served once.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	hs.RegisterOnShutdown(s.stopWatch)
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if s.mem != nil {
		wg.Go(func() { s.reapLoop(bg) })
	}
	if s.cfg.SnapshotPath != "" {
		wg.Go(func() { s.snapshotLoop(bg) })
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	var err error
	select {
	case err = <-errc:
		err = fmt.Errorf("registry: serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = hs.Shutdown(sctx)
		cancel()
		<-errc
	}
	stop()
	wg.Wait()
	if s.cfg.SnapshotPath != "" {
		if serr := s.writeSnapshot(true); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return err
}

func (s *Server) reapLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Reap(s.now())
		}
	}
}

// changed asks for a snapshot without waiting for it.
func (s *Server) changed() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}
