package registry

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// store is the lease table. An expired instance that the reaper has not
// removed yet is already gone for every operation (R3): the registry never
// serves a dead endpoint, whatever the reap interval.
type store struct {
	mu   sync.RWMutex
	byID map[string]*Instance
}

func newStore() *store { return &store{byID: map[string]*Instance{}} }

// live returns the instance with id if its lease holds at now.
func (s *store) live(id string, now time.Time) (*Instance, bool) {
	in, ok := s.byID[id]
	if !ok || in.expired(now) {
		return nil, false
	}
	return in, true
}

// upsert registers in or refreshes the instance with its id (R2): mutable
// fields replaced, lease renewed, registered_at kept. An expired instance
// is replaced as if new.
func (s *store) upsert(in Instance, now time.Time) (Instance, bool) {
	now = now.UTC() // stamps read the same wherever the registry runs
	s.mu.Lock()
	defer s.mu.Unlock()
	in.RegisteredAt, in.UpdatedAt = now, now
	old, ok := s.live(in.ID, now)
	if ok {
		in.RegisteredAt = old.RegisteredAt
	}
	s.byID[in.ID] = &in
	return in, !ok
}

// heartbeat renews the lease of id (R3); false when it is unknown or
// expired, which the caller answers with 410.
func (s *store) heartbeat(id string, now time.Time) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.live(id, now)
	if !ok {
		// Reaped here rather than at the next tick: it is gone anyway.
		delete(s.byID, id)
		return Instance{}, false
	}
	in.UpdatedAt = now.UTC()
	return *in, true
}

// remove deregisters id (R4); false when it is unknown or expired.
func (s *store) remove(id string, now time.Time) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.live(id, now)
	delete(s.byID, id)
	if !ok {
		return Instance{}, false
	}
	return *in, true
}

// reap removes every instance expired at now and returns them.
func (s *store) reap(now time.Time) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []Instance
	for id, in := range s.byID {
		if in.expired(now) {
			gone = append(gone, *in)
			delete(s.byID, id)
		}
	}
	return gone
}

// list returns copies of the live instances, sorted by name then id, only
// the healthy ones when healthyOnly (R6).
func (s *store) list(now time.Time, healthyOnly bool) []Instance {
	s.mu.RLock()
	out := make([]Instance, 0, len(s.byID))
	for _, in := range s.byID {
		if !in.expired(now) && (in.Healthy || !healthyOnly) {
			out = append(out, *in)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// all returns copies of every instance, expired or not, for the snapshot.
func (s *store) all() []Instance {
	s.mu.RLock()
	out := make([]Instance, 0, len(s.byID))
	for _, in := range s.byID {
		out = append(out, *in)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// load replaces the table with ins.
func (s *store) load(ins []Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID = make(map[string]*Instance, len(ins))
	for i := range ins {
		s.byID[ins[i].ID] = &ins[i]
	}
}
