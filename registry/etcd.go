package registry

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults of the etcd store.
const (
	DefaultEtcdPrefix = "/flyd/registry/"
	// DefaultEtcdTimeout bounds each request's work in etcd. Without a
	// quorum etcd does not answer at all, so this is also how long a
	// registrant waits for its 503: shorter than registryclient's 5 s.
	DefaultEtcdTimeout = 2 * time.Second
	// casAttempts bounds the retries of a write that raced another
	// replica's write of the same id.
	casAttempts = 4
	// readAttempts bounds the tries of a read-only transaction, a pause
	// apart.
	readAttempts   = 3
	readRetryPause = 50 * time.Millisecond
	// maxWrites bounds the write transactions a replica has in flight to
	// etcd. Beyond a few, more wait in etcd's queue rather than share its
	// commits, and each holds its encoded request meanwhile (gRPC gives
	// a 100-instance batch a 1 MiB buffer): 100 registrants registering
	// at once, unbounded, took a replica's heap past 1 GiB.
	maxWrites = 16
)

// recordFormat marks the values this registry writes; a value under the
// prefix without it is someone else's and is left alone.
const recordFormat = "flyd.registry/v1"

// record is the value of an instance's key.
type record struct {
	Format   string   `json:"format"`
	Instance Instance `json:"instance"`
	// Shared: the key is on a replica's shared lease, which must never be
	// revoked for one instance. Otherwise its lease (if any) is its own.
	Shared bool `json:"shared_lease,omitempty"`
}

// EtcdConfig configures an EtcdStore.
type EtcdConfig struct {
	Endpoints []string    // client URLs of the cluster's members
	Prefix    string      // keys live under it; "" = DefaultEtcdPrefix
	TLS       *tls.Config // nil = plain http endpoints
	Timeout   time.Duration
	Logger    *zap.Logger
}

// EtcdStore keeps the instances in etcd: one key per instance under the
// prefix, attached to a lease of the instance's TTL (none for a static
// entry), so that etcd's lease expiry is the reaper and every replica on
// the same cluster serves the same registry. Reads go to etcd every time,
// linearizable: a listing is never staler than the last write any replica
// acknowledged. Whether a lease has passed is etcd's to say, on etcd's
// clock: a replica's clock only stamps registered_at and updated_at.
//
// Leases are whole seconds, so a TTL is rounded up to the next second,
// and etcd raises it to its own minimum (1.5 election timeouts); a lease
// also survives a leader change with its time reset, never cut short.
type EtcdStore struct {
	cli     *clientv3.Client
	prefix  string
	timeout time.Duration
	log     *zap.Logger
	where   string // the endpoints, for messages
	ls      leases // see etcd_lease.go
	// writes holds a token per write transaction in flight (maxWrites).
	writes chan struct{}
}

// OpenEtcd connects to the cluster and checks that it answers a
// linearizable read within the timeout: a serve pointed at a wrong address
// or a cluster without quorum refuses to start with a clear error, rather
// than answering 503 until someone reads its log. Once open, a lost quorum
// is answered with 503s while the client keeps reconnecting.
func OpenEtcd(ctx context.Context, cfg EtcdConfig) (*EtcdStore, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("registry: the etcd store needs at least one endpoint")
	}
	for _, ep := range cfg.Endpoints {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			return nil, fmt.Errorf("registry: etcd endpoint %q: give a URL, http:// or https://", ep)
		}
		if strings.HasPrefix(ep, "https://") && cfg.TLS == nil {
			cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(prefix, "/") {
		return nil, fmt.Errorf("registry: etcd prefix %q must start with /", prefix)
	}
	if !strings.HasSuffix(prefix, "/") {
		// "/flyd/registry" must not take in "/flyd/registry-old/...".
		prefix += "/"
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("registry: the etcd timeout must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultEtcdTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  cfg.TLS,
		DialTimeout:          cfg.Timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: cfg.Timeout,
		// The client warns on every retry while a member is down; the
		// registry's own 503s say it once per request already.
		Logger:  log.Named("etcd-client").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
		Context: context.Background(),
	})
	if err != nil {
		return nil, fmt.Errorf("registry: etcd client: %w", err)
	}
	s := &EtcdStore{cli: cli, prefix: prefix, timeout: cfg.Timeout, log: log, where: strings.Join(cfg.Endpoints, ","),
		writes: make(chan struct{}, maxWrites)}
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := cli.Get(pctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("registry: etcd at %s does not answer (is it running, with a quorum of its members up?): %w", s.where, err)
	}
	s.startLeases()
	return s, nil
}

// Close stops renewing the replica's leases and ends the connections to
// etcd.
func (s *EtcdStore) Close() error {
	s.stopLeases()
	return s.cli.Close()
}

// Prefix is the prefix the instances' keys live under.
func (s *EtcdStore) Prefix() string { return s.prefix }

func (s *EtcdStore) key(id string) string { return s.prefix + id }

// unavailable wraps an etcd failure as ErrUnavailable, with words a
// registrant's operator can act on. Without a quorum etcd fails in several
// ways (our deadline, its own, "no leader"), all meaning the same here.
func (s *EtcdStore) unavailable(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = fmt.Errorf("no answer within %s", s.timeout)
	}
	return fmt.Errorf("%w: etcd at %s did not complete %s: it has no quorum or cannot be reached (%v)",
		ErrUnavailable, s.where, op, err)
}

// get reads id's key: nil when there is none. A value that is not our
// record, or that names another id, is someone else's: ErrConflict.
func (s *EtcdStore) get(ctx context.Context, id string) (*mvccpb.KeyValue, record, error) {
	resp, err := s.cli.Get(ctx, s.key(id))
	if err != nil {
		return nil, record{}, s.unavailable("a read", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, record{}, nil
	}
	kv := resp.Kvs[0]
	rec, ok := decodeRecord(kv, s.prefix)
	if !ok {
		return kv, record{}, conflict(kv)
	}
	return kv, rec, nil
}

// conflict is the error of a key under the prefix that is not ours.
func conflict(kv *mvccpb.KeyValue) error {
	return fmt.Errorf("%w: the etcd key %q holds a value this registry did not write; it is left alone", ErrConflict, kv.Key)
}

// registered is get for an id that must be registered: absent, or not
// ours (so unknown to this registry), is ErrNotRegistered.
func (s *EtcdStore) registered(ctx context.Context, id string) (*mvccpb.KeyValue, record, error) {
	kv, rec, err := s.get(ctx, id)
	switch {
	case errors.Is(err, ErrConflict):
		return nil, record{}, ErrNotRegistered
	case err == nil && kv == nil:
		return nil, record{}, ErrNotRegistered
	}
	return kv, rec, err
}

// decodeRecord reads kv as an instance of ours.
func decodeRecord(kv *mvccpb.KeyValue, prefix string) (record, bool) {
	var rec record
	if json.Unmarshal(kv.Value, &rec) != nil || rec.Format != recordFormat ||
		rec.Instance.ID == "" || prefix+rec.Instance.ID != string(kv.Key) {
		return record{}, false
	}
	return rec, true
}

// put writes rec under its key, attached to lease (0 = none), if the key
// is still at rev (0 = absent), and returns the key's new revision; 0 when
// another write came first.
func (s *EtcdStore) put(ctx context.Context, rec record, rev int64, lease clientv3.LeaseID) (int64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("registry: encoding instance %q: %w", rec.Instance.ID, err)
	}
	key := s.key(rec.Instance.ID)
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(b), opts...)).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, ErrNotRegistered
	}
	if err != nil {
		return 0, s.unavailable("a write", err)
	}
	if !resp.Succeeded {
		return 0, nil
	}
	return resp.Header.Revision, nil
}

// leaseSeconds is the etcd lease of a TTL: whole seconds, rounded up.
func leaseSeconds(ttl int64) int64 {
	return (ttl + int64(time.Second) - 1) / int64(time.Second)
}

// revoke ends a lease nobody needs any more. Failing is harmless: an
// unused lease expires on its own.
func (s *EtcdStore) revoke(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("could not revoke an unused etcd lease; it will expire", zap.Int64("lease", int64(lease)), zap.Error(err))
	}
}

// Upsert implements Store. The instance moves onto this replica's shared
// lease of its TTL (none for a static entry) in one compare-and-swap with
// the value; a lease of its own that it leaves is revoked, so a TTL that
// changed takes effect at once.
func (s *EtcdStore) Upsert(ctx context.Context, in Instance, now time.Time) (Instance, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	now = now.UTC()
	for range casAttempts {
		kv, old, err := s.get(ctx, in.ID)
		if err != nil {
			return Instance{}, false, err
		}
		created := kv == nil
		in.RegisteredAt, in.UpdatedAt = now, now
		if !created {
			in.RegisteredAt = old.Instance.RegisteredAt
		}
		done, err := s.attach(ctx, []write{{kv: kv, old: old, rec: record{Format: recordFormat, Instance: in}}})
		if errors.Is(err, ErrNotRegistered) {
			continue // the shared lease lapsed under us; attach forgot it: again
		}
		if err != nil {
			return Instance{}, false, err
		}
		if done {
			return in, created, nil
		}
	}
	return Instance{}, false, s.contended(in.ID)
}

// UpsertMany implements Store: the batch register. Each batchReads of
// instances cost one read-only transaction and one write, a single raft
// commit, rather than a read and a commit each; should another replica
// write one of the keys between the two, that batch goes one by one.
func (s *EtcdStore) UpsertMany(ctx context.Context, ins []Instance, now time.Time) ([]Instance, []bool, []error) {
	out, created, errs := make([]Instance, len(ins)), make([]bool, len(ins)), make([]error, len(ins))
	now = now.UTC()
	inBatches(len(ins), func(start, end int) {
		s.upsertBatch(ctx, ins[start:end], now, out[start:end], created[start:end], errs[start:end])
	})
	return out, created, errs
}

// inBatches calls f on each batchReads of n items, concurrently: the
// batches of one request are as many round trips to etcd, which need not
// wait for each other. A request holds at most MaxBatch items.
func inBatches(n int, f func(start, end int)) {
	if n <= batchReads {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for start := 0; start < n; start += batchReads {
		wg.Go(func() { f(start, min(start+batchReads, n)) })
	}
	wg.Wait()
}

func (s *EtcdStore) upsertBatch(ctx context.Context, ins []Instance, now time.Time, out []Instance, created []bool, errs []error) {
	ids := make([]string, len(ins))
	for i := range ins {
		ids[i] = ins[i].ID
	}
	kvs, err := s.readMany(ctx, ids)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	var ws []write
	var at, alone []int // indexes in ins: written together, and one by one
	seen := make(map[string]bool, len(ins))
	for i, in := range ins {
		if seen[in.ID] {
			alone = append(alone, i) // a key twice in one transaction is refused
			continue
		}
		seen[in.ID] = true
		kv := kvs[i]
		in.RegisteredAt, in.UpdatedAt = now, now
		var old record
		if kv != nil {
			var ok bool
			if old, ok = decodeRecord(kv, s.prefix); !ok {
				errs[i] = conflict(kv)
				continue
			}
			in.RegisteredAt = old.Instance.RegisteredAt
		}
		ws = append(ws, write{kv: kv, old: old, rec: record{Format: recordFormat, Instance: in}})
		at = append(at, i)
	}
	if len(ws) > 0 {
		done, err := s.attach(ctx, ws)
		switch {
		case err != nil && !errors.Is(err, ErrNotRegistered):
			for _, i := range at {
				errs[i] = err
			}
		case done:
			for k, i := range at {
				out[i], created[i] = ws[k].rec.Instance, ws[k].kv == nil
			}
		default: // raced another write, or a shared lease lapsed
			alone = append(alone, at...)
			slices.Sort(alone) // a repeated id after its first
		}
	}
	for _, i := range alone {
		out[i], created[i], errs[i] = s.Upsert(ctx, ins[i], now)
	}
}

// write is a record to put over a key as it was read: kv, nil when the
// key was absent, and old, what kv held.
type write struct {
	kv  *mvccpb.KeyValue
	old record
	rec record
}

// attach puts each record on this replica's shared lease of its TTL (or
// none, for a static entry), in one transaction that writes them all if
// every key is still as read, and none otherwise (false). It revokes the
// leases of their own the keys leave, and records the members. A shared
// lease etcd no longer knows is forgotten: ErrNotRegistered, and the
// caller tries again.
func (s *EtcdStore) attach(ctx context.Context, ws []write) (bool, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmps := make([]clientv3.Cmp, len(ws))
	ops := make([]clientv3.Op, len(ws))
	leases := make([]clientv3.LeaseID, len(ws))
	for i := range ws {
		w := &ws[i]
		var opts []clientv3.OpOption
		w.rec.Shared = false
		if w.rec.Instance.TTL > 0 {
			l, err := s.sharedFor(tctx, w.rec.Instance.TTL)
			if err != nil {
				return false, err
			}
			leases[i], w.rec.Shared = l, true
			opts = append(opts, clientv3.WithLease(l))
		}
		b, err := json.Marshal(w.rec)
		if err != nil {
			return false, fmt.Errorf("registry: encoding instance %q: %w", w.rec.Instance.ID, err)
		}
		key := s.key(w.rec.Instance.ID)
		var rev int64
		if w.kv != nil {
			rev = w.kv.ModRevision
		}
		cmps[i] = clientv3.Compare(clientv3.ModRevision(key), "=", rev)
		ops[i] = clientv3.OpPut(key, string(b), opts...)
	}
	resp, err := s.commit(ctx, cmps, ops)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.forgetLapsed(tctx, leases)
		return false, ErrNotRegistered
	}
	if err != nil {
		return false, s.unavailable("a write", err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	// One transaction: every key it wrote is at its revision.
	rev := resp.Header.Revision
	for i, w := range ws {
		if w.kv != nil && w.kv.Lease != 0 && !w.old.Shared && clientv3.LeaseID(w.kv.Lease) != leases[i] {
			s.revoke(clientv3.LeaseID(w.kv.Lease))
		}
		if leases[i] != 0 {
			s.joined(w.rec.Instance.ID, leases[i], rev, w.rec.Instance.TTL, w.rec.Instance.UpdatedAt)
		} else {
			s.left(w.rec.Instance.ID)
		}
	}
	return true, nil
}

// commit runs a write transaction once a token of s.writes is free. The
// wait is bounded by ctx, the transaction by the timeout: waiting behind
// this replica's own writes is not etcd failing to answer, and a burst of
// registers is answered late rather than 503 (which would send its
// registrants to another replica with the same writes to make).
func (s *EtcdStore) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	select {
	case s.writes <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.writes }()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

func (s *EtcdStore) contended(id string) error {
	return fmt.Errorf("%w: instance %q was rewritten %d times while this replica wrote it; retry", ErrUnavailable, id, casAttempts)
}

// Heartbeat implements Store. When the key is on this replica's shared
// lease as it wrote it, the heartbeat is that read and a note in memory:
// no write. Otherwise (another replica took the last one, the instance was
// idle, or it is a static entry) the instance is written onto this
// replica's lease with updated_at now.
func (s *EtcdStore) Heartbeat(ctx context.Context, id string, now time.Time) (Instance, error) {
	return s.onRegistered(ctx, id, func(ctx context.Context, kv *mvccpb.KeyValue, rec *record) (bool, error) {
		if s.renewed(kv, rec, now) {
			return true, nil
		}
		w := s.moved(kv, rec, now)
		done, err := s.attach(ctx, []write{w})
		if errors.Is(err, ErrNotRegistered) {
			return false, nil // this replica's lease lapsed: read again
		}
		*rec = w.rec
		return done, err
	})
}

// renewed is a heartbeat of the key kv as read, if the replica's shared
// lease already holds it: then it is only noted.
func (s *EtcdStore) renewed(kv *mvccpb.KeyValue, rec *record, now time.Time) bool {
	now = now.UTC()
	if kv.Lease != 0 && s.beat(rec.Instance.ID, clientv3.LeaseID(kv.Lease), kv.ModRevision, now) {
		rec.Instance.UpdatedAt = now
		return true
	}
	return false
}

// moved is the write of a heartbeat that renewed could not take: the
// instance with updated_at now, onto this replica's lease.
func (s *EtcdStore) moved(kv *mvccpb.KeyValue, rec *record, now time.Time) write {
	in := rec.Instance
	in.UpdatedAt = now.UTC()
	return write{kv: kv, old: *rec, rec: record{Format: recordFormat, Instance: in}}
}

// HeartbeatMany implements Store: the keys are read in read-only
// transactions of batchReads (no raft commit), and each is renewed as
// Heartbeat does; the instances that must move onto this replica's lease
// (all of a replica's that died, at its registrants' next heartbeats) move
// in one write per batch, not one each.
func (s *EtcdStore) HeartbeatMany(ctx context.Context, ids []string, now time.Time) ([]Instance, []error) {
	out, errs := make([]Instance, len(ids)), make([]error, len(ids))
	inBatches(len(ids), func(start, end int) {
		s.heartbeatBatch(ctx, ids[start:end], now, out[start:end], errs[start:end])
	})
	return out, errs
}

func (s *EtcdStore) heartbeatBatch(ctx context.Context, ids []string, now time.Time, out []Instance, errs []error) {
	kvs, err := s.readMany(ctx, ids)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	var ws []write
	var at, alone []int
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if seen[id] {
			alone = append(alone, i)
			continue
		}
		seen[id] = true
		kv := kvs[i]
		rec, ok := record{}, kv != nil
		if ok {
			rec, ok = decodeRecord(kv, s.prefix)
		}
		switch {
		case !ok:
			errs[i] = ErrNotRegistered
		case s.renewed(kv, &rec, now):
			out[i] = rec.Instance
		default:
			ws = append(ws, s.moved(kv, &rec, now))
			at = append(at, i)
		}
	}
	if len(ws) > 0 {
		done, err := s.attach(ctx, ws)
		switch {
		case err != nil && !errors.Is(err, ErrNotRegistered):
			for _, i := range at {
				errs[i] = err
			}
		case done:
			for k, i := range at {
				out[i] = ws[k].rec.Instance
			}
		default: // raced another write: the one-by-one path reads again
			alone = append(alone, at...)
			slices.Sort(alone)
		}
	}
	for _, i := range alone {
		out[i], errs[i] = s.Heartbeat(ctx, ids[i], now)
	}
}

// readMany reads the keys of ids in one read-only transaction: nil for an
// absent key. Being only a read, it is tried again within the timeout when
// it fails: etcd's client retries a failed range by itself, but not a
// transaction, and the member it was connected to may just have died, or
// the leader changed.
func (s *EtcdStore) readMany(ctx context.Context, ids []string) ([]*mvccpb.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ops := make([]clientv3.Op, len(ids))
	for i, id := range ids {
		ops[i] = clientv3.OpGet(s.key(id))
	}
	var resp *clientv3.TxnResponse
	var err error
	for try := range readAttempts {
		if resp, err = s.cli.Txn(ctx).Then(ops...).Commit(); err == nil || ctx.Err() != nil {
			break
		}
		if try < readAttempts-1 {
			time.Sleep(readRetryPause)
		}
	}
	if err != nil {
		return nil, s.unavailable("a read", err)
	}
	out := make([]*mvccpb.KeyValue, len(ids))
	for i, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) == 1 {
			out[i] = rr.Kvs[0]
		}
	}
	return out, nil
}

// Remove implements Store.
func (s *EtcdStore) Remove(ctx context.Context, id string, _ time.Time) (Instance, error) {
	return s.onRegistered(ctx, id, func(ctx context.Context, kv *mvccpb.KeyValue, rec *record) (bool, error) {
		key := s.key(id)
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return false, s.unavailable("a delete", err)
		}
		if resp.Succeeded {
			s.left(id)
			if !rec.Shared {
				s.revoke(clientv3.LeaseID(kv.Lease))
			}
		}
		return resp.Succeeded, nil
	})
}

// onRegistered runs write on the key of a registered id, reading it again
// when another replica's write came first (write says false), and returns
// the instance as write left it.
func (s *EtcdStore) onRegistered(ctx context.Context, id string,
	write func(context.Context, *mvccpb.KeyValue, *record) (bool, error)) (Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for range casAttempts {
		kv, rec, err := s.registered(ctx, id)
		if err != nil {
			return Instance{}, err
		}
		ok, err := write(ctx, kv, &rec)
		if err != nil {
			return Instance{}, err
		}
		if ok {
			return rec.Instance, nil
		}
	}
	return Instance{}, s.contended(id)
}

// List implements Store. Values under the prefix that are not ours are
// skipped, not deleted: the prefix may be shared by mistake, and deleting
// what another program wrote would be worse than ignoring it.
func (s *EtcdStore) List(ctx context.Context, _ time.Time, healthyOnly bool) ([]Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.unavailable("a listing", err)
	}
	out := make([]Instance, 0, len(resp.Kvs))
	foreign := 0
	for _, kv := range resp.Kvs {
		rec, ok := decodeRecord(kv, s.prefix)
		if !ok {
			foreign++
			continue
		}
		if rec.Instance.Healthy || !healthyOnly {
			if at, ok := s.stamped(rec.Instance.ID, kv.ModRevision); ok {
				rec.Instance.UpdatedAt = at // a heartbeat this replica took without writing
			}
			out = append(out, rec.Instance)
		}
	}
	if foreign > 0 {
		s.log.Debug("keys under the registry prefix that are not instances were ignored",
			zap.String("prefix", s.prefix), zap.Int("keys", foreign))
	}
	return out, nil
}
