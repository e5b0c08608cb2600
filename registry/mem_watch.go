package registry

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// DefaultHistory is how many changes the memory store keeps for watches
// to resume from: a watcher further behind than that lists again.
const DefaultHistory = 10000

// uncleanJump is how far the memory store's revision jumps when it loads
// a snapshot that a registry did not write as it stopped: changes after
// that snapshot were lost, and a watcher may have seen their revisions.
// Numbering on from the snapshot would give those revisions to other
// changes, and a watcher resuming from one would miss them silently; past
// the jump it is told ErrCompacted and lists again.
const uncleanJump = 1 << 32

// memWatch is the memory store's revisions and history, guarded by the
// store's mu.
type memWatch struct {
	now   func() time.Time
	rev   int64            // the last change's revision
	revs  map[string]int64 // the revision each instance was last written at
	floor int64            // the oldest revision a watch may resume from
	hist  []Change         // the changes after floor, oldest first
	max   int
	wake  chan struct{} // closed, and replaced, at every change
}

func (w *memWatch) init(now func() time.Time, max int) {
	w.now, w.max, w.revs, w.wake = now, max, map[string]int64{}, make(chan struct{})
}

// record numbers a change and wakes the watches.
func (w *memWatch) record(typ string, in Instance) {
	w.rev++
	if typ == ChangePut {
		w.revs[in.ID] = w.rev
	} else {
		delete(w.revs, in.ID)
	}
	w.hist = append(w.hist, Change{Rev: w.rev, Type: typ, Instance: in})
	if len(w.hist) >= 2*w.max {
		// Drop the older half at once: one copy per max changes.
		w.hist = slices.Clone(w.hist[len(w.hist)-w.max:])
	}
	if len(w.hist) > w.max {
		w.floor = w.hist[len(w.hist)-w.max].Rev - 1
	} else if len(w.hist) > 0 {
		w.floor = max(w.floor, w.hist[0].Rev-1)
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// since returns the changes after rev (nil when none) and whether the
// history still reaches back to rev.
func (w *memWatch) since(rev int64) ([]Change, bool) {
	if rev < w.floor || rev > w.rev {
		return nil, false
	}
	if rev == w.rev {
		return nil, true
	}
	first := w.hist[len(w.hist)-1].Rev - int64(len(w.hist)) + 1
	return slices.Clone(w.hist[rev+1-first:]), true
}

// load starts the revisions where a snapshot left them: its instances as
// of their revisions, and no history before it.
func (w *memWatch) load(f snapshotFile) {
	w.rev = f.Rev
	if !f.Clean {
		w.rev += uncleanJump
	}
	w.floor, w.hist, w.revs = w.rev, nil, make(map[string]int64, len(f.Instances))
	for _, in := range f.Instances {
		r := f.Revs[in.ID]
		if r <= 0 || r > w.rev || !f.Clean {
			r = w.rev
		}
		w.revs[in.ID] = r
	}
}

// Watch implements Watcher. Expiries are told as the reaper removes the
// instances (every reap interval), or when a request finds one expired.
func (s *memStore) Watch(ctx context.Context, after int64, send func([]Change) error) error {
	if after < 0 {
		return ErrCompacted
	}
	s.mu.RLock()
	cur := after
	var first []Change
	if after == 0 {
		now := s.w.now()
		for id, in := range s.byID {
			if !in.expired(now) {
				first = append(first, Change{Rev: s.w.revs[id], Type: ChangePut, Instance: *in})
			}
		}
		cur = s.w.rev
		first = append(first, Change{Rev: cur, Type: ChangeSynced})
	} else if _, ok := s.w.since(after); !ok {
		s.mu.RUnlock()
		return ErrCompacted
	}
	s.mu.RUnlock()
	if after == 0 {
		slices.SortStableFunc(first[:len(first)-1], func(a, b Change) int {
			return cmp.Or(cmp.Compare(a.Rev, b.Rev), cmp.Compare(a.Instance.ID, b.Instance.ID))
		})
	} else {
		first = []Change{} // accepted
	}
	if err := send(first); err != nil {
		return err
	}
	for {
		s.mu.RLock()
		batch, ok := s.w.since(cur)
		wake := s.w.wake
		s.mu.RUnlock()
		switch {
		case !ok:
			return ErrCompacted // fell further behind than the history
		case len(batch) > 0:
			if err := send(batch); err != nil {
				return err
			}
			cur = batch[len(batch)-1].Rev
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}
