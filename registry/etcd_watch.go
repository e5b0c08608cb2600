package registry

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements Watcher with etcd's own revisions and watch: a
// revision is the cluster's, the same on every replica, so a watcher may
// resume on another replica than the one it lost. etcd keeps the changes
// until it compacts them (its --auto-compaction-* flags); a revision
// compacted away is ErrCompacted.
//
// Moving an instance between leases (a heartbeat on another replica, an
// idle instance leaving the shared lease) rewrites its key: a put, with
// the instance unchanged but for updated_at. Keys that are not this
// registry's are not told, and a key of ours that something else
// overwrites is told as deleted.
func (s *EtcdStore) Watch(ctx context.Context, after int64, send func([]Change) error) error {
	if after < 0 {
		return ErrCompacted
	}
	// The watch needs a leader: without one it fails, rather than
	// waiting in silence on a member cut off from the others.
	ctx = clientv3.WithRequireLeader(ctx)
	var first []Change
	if after == 0 {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Get(rctx, s.prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			return s.unavailable("a listing", err)
		}
		for _, kv := range resp.Kvs {
			if rec, ok := decodeRecord(kv, s.prefix); ok {
				first = append(first, Change{Rev: kv.ModRevision, Type: ChangePut, Instance: rec.Instance})
			}
		}
		slices.SortFunc(first, func(a, b Change) int { return cmp.Compare(a.Rev, b.Rev) })
		after = resp.Header.Revision
		first = append(first, Change{Rev: after, Type: ChangeSynced})
	} else {
		// Whether etcd still has the revision: a read at it fails when it
		// was compacted, or is still to come.
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.cli.Get(rctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(after))
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrCompacted), errors.Is(err, rpctypes.ErrFutureRev):
			return ErrCompacted
		case err != nil:
			return s.unavailable("a read", err)
		}
		first = []Change{}
	}
	wch := s.cli.Watch(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(after+1), clientv3.WithPrevKV())
	if err := send(first); err != nil {
		return err
	}
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return ErrCompacted
		}
		if err := resp.Err(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return s.unavailable("a watch", err)
		}
		var cs []Change
		for _, ev := range resp.Events {
			if c, ok := s.change(ev); ok {
				cs = append(cs, c)
			}
		}
		if len(cs) > 0 {
			if err := send(cs); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return s.unavailable("a watch", errors.New("etcd ended the watch"))
}

// change is an etcd event as a Change, if it is one of this registry's.
func (s *EtcdStore) change(ev *clientv3.Event) (Change, bool) {
	rev := ev.Kv.ModRevision
	var prev *record
	if ev.PrevKv != nil {
		if rec, ok := decodeRecord(ev.PrevKv, s.prefix); ok {
			prev = &rec
		}
	}
	if ev.Type == mvccpb.PUT {
		if rec, ok := decodeRecord(ev.Kv, s.prefix); ok {
			return Change{Rev: rev, Type: ChangePut, Instance: rec.Instance}, true
		}
		if prev == nil {
			return Change{}, false
		}
		return Change{Rev: rev, Type: ChangeDelete, Instance: prev.Instance}, true
	}
	if ev.PrevKv != nil && prev == nil {
		return Change{}, false // someone else's key went
	}
	in := Instance{ID: strings.TrimPrefix(string(ev.Kv.Key), s.prefix)}
	if prev != nil {
		in = prev.Instance
	}
	return Change{Rev: rev, Type: ChangeDelete, Instance: in}, true
}
