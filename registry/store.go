package registry

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Store keeps the instances a Server serves: the lease table. The handlers
// validate, stamp nothing and map errors; a Store applies the rules of R2–R4
// to its own state, so that the wire is the same whichever store is behind
// it. now is the replica's clock, for the registered_at and updated_at
// stamps; whether a lease has passed is the store's to decide (the memory
// store reads now, etcd its own lease clock).
type Store interface {
	// Upsert registers in or refreshes the instance with its id (R2):
	// mutable fields replaced, lease renewed, registered_at kept, updated_at
	// now. An expired instance is replaced as if new; created says so.
	Upsert(ctx context.Context, in Instance, now time.Time) (out Instance, created bool, err error)
	// UpsertMany is Upsert of each of ins, answered per instance in the
	// same order: the batch register, one request for many instances.
	UpsertMany(ctx context.Context, ins []Instance, now time.Time) ([]Instance, []bool, []error)
	// Heartbeat renews the lease of id and stamps updated_at (R3);
	// ErrNotRegistered when it is unknown or its lease passed.
	Heartbeat(ctx context.Context, id string, now time.Time) (Instance, error)
	// HeartbeatMany is Heartbeat of each of ids, answered per id in the
	// same order: the batch heartbeat, one request for a registrant's
	// instances.
	HeartbeatMany(ctx context.Context, ids []string, now time.Time) ([]Instance, []error)
	// Remove deregisters id (R4); ErrNotRegistered when it is not registered.
	Remove(ctx context.Context, id string, now time.Time) (Instance, error)
	// List returns the live instances in any order, only the healthy ones
	// when healthyOnly (R6).
	List(ctx context.Context, now time.Time, healthyOnly bool) ([]Instance, error)
}

// Errors a Store returns, mapped to statuses once, in handlers.go.
var (
	// ErrNotRegistered: the id is unknown, or its lease passed.
	ErrNotRegistered = errors.New("instance not registered")
	// ErrUnavailable: the store cannot answer now (no quorum, unreachable);
	// the request may succeed later.
	ErrUnavailable = errors.New("registry store unavailable")
	// ErrConflict: the store holds something under the id that is not this
	// registry's, which it does not overwrite.
	ErrConflict = errors.New("conflicting entry in the registry store")
)

// sortInstances orders a listing by name, then id: every store lists the
// same way.
func sortInstances(ins []Instance) {
	slices.SortFunc(ins, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
}

// memStore is the in-memory lease table, the default store and the
// embedded registry's. An expired instance that the reaper has not
// removed yet is already gone for every operation (R3): the registry never
// serves a dead endpoint, whatever the reap interval.
//
// It numbers its changes with a revision of its own (see mem_watch.go):
// every write and every removal is one, a heartbeat none.
type memStore struct {
	// mu guards byID, the instances it points to (copied out under it),
	// and w; held shared for a listing, a snapshot or a watch's read.
	mu   sync.RWMutex
	byID map[string]*Instance
	w    memWatch
}

func newMemStore(now func() time.Time) *memStore {
	s := &memStore{byID: map[string]*Instance{}}
	s.w.init(now, DefaultHistory)
	return s
}

// live returns the instance with id if its lease holds at now.
func (s *memStore) live(id string, now time.Time) (*Instance, bool) {
	in, ok := s.byID[id]
	if !ok || in.expired(now) {
		return nil, false
	}
	return in, true
}

// Upsert implements Store.
func (s *memStore) Upsert(_ context.Context, in Instance, now time.Time) (Instance, bool, error) {
	now = now.UTC() // stamps read the same wherever the registry runs
	s.mu.Lock()
	defer s.mu.Unlock()
	in.RegisteredAt, in.UpdatedAt = now, now
	old, ok := s.live(in.ID, now)
	if ok {
		in.RegisteredAt = old.RegisteredAt
	}
	s.byID[in.ID] = &in
	s.w.record(ChangePut, in)
	return in, !ok, nil
}

// UpsertMany implements Store.
func (s *memStore) UpsertMany(ctx context.Context, ins []Instance, now time.Time) ([]Instance, []bool, []error) {
	out, created, errs := make([]Instance, len(ins)), make([]bool, len(ins)), make([]error, len(ins))
	for i, in := range ins {
		out[i], created[i], errs[i] = s.Upsert(ctx, in, now)
	}
	return out, created, errs
}

// Heartbeat implements Store.
func (s *memStore) Heartbeat(_ context.Context, id string, now time.Time) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.live(id, now)
	if !ok {
		// Reaped here rather than at the next tick: it is gone anyway.
		s.drop(id)
		return Instance{}, ErrNotRegistered
	}
	in.UpdatedAt = now.UTC()
	return *in, nil
}

// HeartbeatMany implements Store.
func (s *memStore) HeartbeatMany(ctx context.Context, ids []string, now time.Time) ([]Instance, []error) {
	out, errs := make([]Instance, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		out[i], errs[i] = s.Heartbeat(ctx, id, now)
	}
	return out, errs
}

// Remove implements Store.
func (s *memStore) Remove(_ context.Context, id string, now time.Time) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.live(id, now)
	s.drop(id)
	if !ok {
		return Instance{}, ErrNotRegistered
	}
	return *in, nil
}

// drop removes id, if present, and records its removal. The caller holds
// mu.
func (s *memStore) drop(id string) {
	if in, ok := s.byID[id]; ok {
		delete(s.byID, id)
		s.w.record(ChangeDelete, *in)
	}
}

// reap removes every instance expired at now and returns them.
func (s *memStore) reap(now time.Time) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []Instance
	for id, in := range s.byID {
		if in.expired(now) {
			gone = append(gone, *in)
			s.drop(id)
		}
	}
	return gone
}

// List implements Store.
func (s *memStore) List(_ context.Context, now time.Time, healthyOnly bool) ([]Instance, error) {
	s.mu.RLock()
	out := make([]Instance, 0, len(s.byID))
	for _, in := range s.byID {
		if !in.expired(now) && (in.Healthy || !healthyOnly) {
			out = append(out, *in)
		}
	}
	s.mu.RUnlock()
	return out, nil
}

// state returns copies of every instance, expired or not, by id, with
// the revisions, for the snapshot.
func (s *memStore) state() snapshotFile {
	s.mu.RLock()
	f := snapshotFile{Version: snapshotVersion, Instances: make([]Instance, 0, len(s.byID)),
		Rev: s.w.rev, Revs: make(map[string]int64, len(s.byID))}
	for id, in := range s.byID {
		f.Instances = append(f.Instances, *in)
		f.Revs[id] = s.w.revs[id]
	}
	s.mu.RUnlock()
	slices.SortFunc(f.Instances, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return f
}

// load replaces the table with the snapshot's.
func (s *memStore) load(f snapshotFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID = make(map[string]*Instance, len(f.Instances))
	for i := range f.Instances {
		s.byID[f.Instances[i].ID] = &f.Instances[i]
	}
	s.w.load(f)
}

// all returns copies of every instance, expired or not, by id.
func (s *memStore) all() []Instance { return s.state().Instances }
