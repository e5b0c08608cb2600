package registry

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A replica's shared leases.
//
// An instance does not get an etcd lease of its own: a grant, a revoke and
// a keep-alive per instance made every registration three raft commits and
// kept a lease per instance in etcd's leader. Instead each replica holds
// one lease per TTL (in whole seconds), renewed every renewEvery while the
// replica lives, and attaches to it the instances it registered or took a
// heartbeat of. A heartbeat of an instance already on the replica's lease
// is a read (no raft commit) and a note in the replica's memory of when it
// came; only a heartbeat that reaches another replica than the last one
// writes, once, to move the instance onto that replica's lease.
//
// Each instance still expires on its own. The replica knows every
// heartbeat of the instances on its lease, since a heartbeat anywhere else
// moves the instance away. An instance that has not been heart-beaten for
// idleAfter (half its TTL: longer than any sane heartbeat period) is moved
// off the shared lease onto a lease of its own, granted for exactly the
// time its TTL has left after its last heartbeat, so etcd deletes it when
// that runs out: not a moment sooner than R3 says, and no later than the
// lease's rounding up to whole seconds. Should it beat again meanwhile, it
// moves back. If the replica dies, its leases are no longer renewed and
// lapse TTL+margin after its last renewal: the registrants' next
// heartbeats, a third of a TTL away, reach another replica and move their
// instances there, and an instance that died in the idleAfter before the
// replica did goes at most idleAfter+margin late.

// renewEvery is how often a replica renews its shared leases, and
// leaseMargin what a shared lease holds beyond its TTL so that an instance
// heart-beaten just before a renewal that never comes still has its whole
// TTL.
const (
	renewEvery  = time.Second
	leaseMargin = 2 * time.Second
	// batchReads bounds the keys of one read-only transaction (etcd's
	// --max-txn-ops defaults to 128).
	batchReads = 100
)

// sharedLease is a replica's lease for the instances of one TTL.
type sharedLease struct {
	id  clientv3.LeaseID
	ttl int64 // seconds, the instances' TTL rounded up
}

// member is an instance on one of this replica's shared leases: what the
// replica wrote (its key's revision) and when it was last heart-beaten.
type member struct {
	lease clientv3.LeaseID
	rev   int64
	ttl   time.Duration
	beat  time.Time // the replica's monotonic clock
	stamp time.Time // updated_at of the last heartbeat, for listings
	// moving: the idle loop is moving it off the shared lease; a heartbeat
	// meanwhile writes rather than trusting the shared lease.
	moving bool
}

// leases is the replica's side of the shared leases, guarded by mu.
type leases struct {
	// mu guards byTTL, members and the fields of each member, and is
	// never held during a request to etcd.
	mu sync.Mutex
	// granting is held by the request granting a shared lease, a one-slot
	// lock taken before mu (around the grant), never under it.
	granting chan struct{}
	byTTL    map[int64]*sharedLease
	members  map[string]*member
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// startLeases starts the loops that renew the shared leases and move idle
// instances off them. They are two: a renewal must never wait behind the
// moves, however many instances fall idle at once (a registrant that
// stopped, its thousand instances with it), since a shared lease that
// lapses takes every instance on it along.
func (s *EtcdStore) startLeases() {
	ctx, cancel := context.WithCancel(context.Background())
	s.ls.byTTL, s.ls.members, s.ls.stop = map[int64]*sharedLease{}, map[string]*member{}, cancel
	s.ls.granting = make(chan struct{}, 1)
	every := func(f func(context.Context)) {
		t := time.NewTicker(renewEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(ctx)
			}
		}
	}
	s.ls.wg.Go(func() { every(s.renew) })
	s.ls.wg.Go(func() { every(s.moveIdle) })
}

// stopLeases stops the loops. The shared leases are not revoked: that
// would delete every instance of a replica that is only restarting. They
// lapse TTL+margin later, by when the registrants' heartbeats have moved
// their instances to another replica.
func (s *EtcdStore) stopLeases() {
	s.ls.stop()
	s.ls.wg.Wait()
}

// idleAfter is how long an instance may go without a heartbeat before it
// leaves the shared lease.
func idleAfter(ttl time.Duration) time.Duration { return max(ttl/2, renewEvery) }

// sharedFor returns this replica's lease for ttl, granting it on first use.
// One request grants it while the others that need it wait: a thousand
// registers arriving at once make one grant, not a thousand and as many
// revokes.
func (s *EtcdStore) sharedFor(ctx context.Context, ttl int64) (clientv3.LeaseID, error) {
	secs := leaseSeconds(ttl)
	lookup := func() clientv3.LeaseID {
		s.ls.mu.Lock()
		defer s.ls.mu.Unlock()
		if l := s.ls.byTTL[secs]; l != nil {
			return l.id
		}
		return 0
	}
	if id := lookup(); id != 0 {
		return id, nil
	}
	select {
	case s.ls.granting <- struct{}{}:
	case <-ctx.Done():
		return 0, s.unavailable("a lease grant", ctx.Err())
	}
	defer func() { <-s.ls.granting }()
	if id := lookup(); id != 0 {
		return id, nil // granted while this one waited
	}
	g, err := s.cli.Grant(ctx, secs+int64(leaseMargin/time.Second))
	if err != nil {
		return 0, s.unavailable("a lease grant", err)
	}
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	s.ls.byTTL[secs] = &sharedLease{id: g.ID, ttl: secs}
	return g.ID, nil
}

// joined records that id's key, at rev, is on this replica's shared lease.
func (s *EtcdStore) joined(id string, lease clientv3.LeaseID, rev int64, ttl int64, stamp time.Time) {
	s.ls.mu.Lock()
	s.ls.members[id] = &member{lease: lease, rev: rev, ttl: time.Duration(ttl), beat: time.Now(), stamp: stamp}
	s.ls.mu.Unlock()
}

// left forgets id.
func (s *EtcdStore) left(id string) {
	s.ls.mu.Lock()
	delete(s.ls.members, id)
	s.ls.mu.Unlock()
}

// beat notes a heartbeat of id if its key is still what this replica
// wrote on its shared lease, and reports whether it did: then the lease
// covers the heartbeat and nothing needs writing.
func (s *EtcdStore) beat(id string, lease clientv3.LeaseID, rev int64, stamp time.Time) bool {
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	m := s.ls.members[id]
	if m == nil || m.moving || m.lease != lease || m.rev != rev {
		return false
	}
	m.beat, m.stamp = time.Now(), stamp
	return true
}

// stamped returns the updated_at of the last heartbeat this replica took
// of id at rev, if it took one after the key was written.
func (s *EtcdStore) stamped(id string, rev int64) (time.Time, bool) {
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	m := s.ls.members[id]
	if m == nil || m.rev != rev {
		return time.Time{}, false
	}
	return m.stamp, true
}

// renew keeps the shared leases alive. A lease etcd no longer knows (it
// lapsed during a long outage) is forgotten with its members: their keys
// are gone, and their registrants' next heartbeats get 410.
func (s *EtcdStore) renew(ctx context.Context) {
	s.ls.mu.Lock()
	ls := make([]*sharedLease, 0, len(s.ls.byTTL))
	for _, l := range s.ls.byTTL {
		ls = append(ls, l)
	}
	s.ls.mu.Unlock()
	for _, l := range ls {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.cli.KeepAliveOnce(rctx, l.id)
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.log.Warn("a shared lease lapsed; its instances are gone until registered again", zap.Int64("lease", int64(l.id)), zap.Int64("ttl_s", l.ttl))
			s.forgetLease(l.id)
		} else if err != nil && ctx.Err() == nil {
			s.log.Debug("renewing a shared lease failed; trying again", zap.Int64("lease", int64(l.id)), zap.Error(err))
		}
	}
}

// forgetLease forgets a shared lease etcd no longer knows, and its members.
func (s *EtcdStore) forgetLease(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	for ttl, l := range s.ls.byTTL {
		if l.id == lease {
			delete(s.ls.byTTL, ttl)
		}
	}
	for id, m := range s.ls.members {
		if m.lease == lease {
			delete(s.ls.members, id)
		}
	}
}

// forgetLapsed forgets those of leases etcd no longer knows, after a write
// naming them was refused for one of them. A lease that still lives is
// kept: forgetting it would stop its renewals, and its instances would
// lapse with it.
func (s *EtcdStore) forgetLapsed(ctx context.Context, leases []clientv3.LeaseID) {
	seen := map[clientv3.LeaseID]bool{0: true}
	for _, l := range leases {
		if seen[l] {
			continue
		}
		seen[l] = true
		resp, err := s.cli.TimeToLive(ctx, l)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0) {
			s.forgetLease(l)
		}
	}
}

// idle is an instance that stopped beating, to move off the shared lease
// with left of its TTL.
type idle struct {
	id   string
	m    member
	left time.Duration
}

// moveIdle moves the instances that stopped beating off the shared lease,
// each onto a lease of the time it has left. Those with as many whole
// seconds left share that lease, which expires them all at the same
// moment each would have expired on its own lease (leases are whole
// seconds): one grant and one write per batchReads of them, not a grant
// and a write each.
func (s *EtcdStore) moveIdle(ctx context.Context) {
	now := time.Now()
	bySecs := map[int64][]idle{}
	s.ls.mu.Lock()
	for id, m := range s.ls.members {
		if now.Sub(m.beat) >= idleAfter(m.ttl) && !m.moving {
			m.moving = true
			left := m.beat.Add(m.ttl).Sub(now)
			secs := int64(0) // nothing left: deleted
			if left > 0 {
				secs = leaseSeconds(int64(left))
			}
			bySecs[secs] = append(bySecs[secs], idle{id, *m, left})
		}
	}
	s.ls.mu.Unlock()
	// The least time left first: those are the ones that must not wait.
	secs := slices.Sorted(maps.Keys(bySecs))
	for _, n := range secs {
		todo := bySecs[n]
		for start := 0; start < len(todo); start += batchReads {
			batch := todo[start:min(start+batchReads, len(todo))]
			if ctx.Err() != nil {
				s.unmark(batch)
				continue
			}
			if err := s.moveOffMany(ctx, n, batch); err != nil {
				s.log.Debug("moving idle instances off the shared lease failed; trying again", zap.Int("instances", len(batch)), zap.Error(err))
				s.unmark(batch)
			}
		}
	}
}

// unmark lets the next round try to move the instances again.
func (s *EtcdStore) unmark(batch []idle) {
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	for _, it := range batch {
		if m := s.ls.members[it.id]; m != nil && m.rev == it.m.rev {
			m.moving = false
		}
	}
}

// leftAt forgets id if its key is still at rev: a heartbeat that moved it
// meanwhile has made it a member again, at another revision.
func (s *EtcdStore) leftAt(id string, rev int64) {
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	if m := s.ls.members[id]; m != nil && m.rev == rev {
		delete(s.ls.members, id)
	}
}

// moveOffMany puts the keys of batch, those still as this replica wrote
// them, on one new lease of secs seconds, or deletes them when secs is 0,
// in one transaction. Should another write come first to one of them, the
// batch goes one by one.
func (s *EtcdStore) moveOffMany(ctx context.Context, secs int64, batch []idle) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.id
	}
	kvs, err := s.readMany(ctx, ids)
	if err != nil {
		return err
	}
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	var mine []idle
	var g clientv3.LeaseID
	for i, it := range batch {
		kv := kvs[i]
		if kv == nil || kv.ModRevision != it.m.rev {
			// No longer this replica's to move: gone, or rewritten.
			s.leftAt(it.id, it.m.rev)
			continue
		}
		rec, ok := decodeRecord(kv, s.prefix)
		if !ok {
			s.leftAt(it.id, it.m.rev)
			continue
		}
		key := s.key(it.id)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", it.m.rev))
		mine = append(mine, it)
		if secs == 0 {
			ops = append(ops, clientv3.OpDelete(key))
			continue
		}
		if g == 0 {
			resp, err := s.cli.Grant(ctx, secs)
			if err != nil {
				return err
			}
			g = resp.ID
		}
		rec.Shared = false
		rec.Instance.UpdatedAt = it.m.stamp
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(key, string(b), clientv3.WithLease(g)))
	}
	if len(ops) == 0 {
		return nil
	}
	resp, err := s.commit(ctx, cmps, ops)
	if err != nil || !resp.Succeeded {
		s.revoke(g)
	}
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		for _, it := range mine {
			if err := s.moveOff(ctx, it.id, it.m, it.left); err != nil {
				s.unmark([]idle{it})
				continue
			}
			s.leftAt(it.id, it.m.rev)
		}
		return nil
	}
	for _, it := range mine {
		s.leftAt(it.id, it.m.rev)
	}
	return nil
}

// moveOff puts id's key, if still as this replica wrote it, on a lease of
// its own for left, or deletes it if nothing is left. A key someone else
// rewrote meanwhile is no longer this replica's to move.
func (s *EtcdStore) moveOff(ctx context.Context, id string, m member, left time.Duration) error {
	key := s.key(id)
	if left <= 0 {
		_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", m.rev)).Then(clientv3.OpDelete(key)).Commit()
		return err
	}
	kv, rec, err := s.get(ctx, id)
	if err != nil || kv == nil || kv.ModRevision != m.rev {
		return err
	}
	g, err := s.cli.Grant(ctx, leaseSeconds(int64(left)))
	if err != nil {
		return err
	}
	rec.Shared = false
	rec.Instance.UpdatedAt = m.stamp
	if ok, err := s.put(ctx, rec, m.rev, g.ID); err != nil || ok == 0 {
		s.revoke(g.ID)
		return err
	}
	return nil
}
