package records

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/flyd-dev/flyd/journal"
)

// GroupLinger bounds how long a member's change waits for the rest of
// its group: a member whose stop takes its grace period holds the others
// back no longer than this.
const GroupLinger = 20 * time.Millisecond

// Group gathers the records of a batch's workloads (a batch stop: each
// workload's state at rest) into one journal write. It has a member per
// workload; each member either hands its change, which returns once it
// is durable, or leaves. The change is written once every member still
// expected has handed its change or left, or once the first change
// waiting has waited GroupLinger, whichever comes first; the changes
// after that go in the next write.
type Group struct {
	s *Store
	// mu guards expected and next; it is never held while the journal
	// is written.
	mu       sync.Mutex
	expected int // members that have neither handed a change nor left
	next     *groupWrite
}

// groupWrite is the changes of one write, and what their members wait
// for.
type groupWrite struct {
	changes []journal.Change
	done    chan struct{}
	err     error
}

// Member is one workload's part in a Group. Its first change goes with
// the group's; a later one is written on its own, as the Store writes it.
type Member struct {
	g    *Group
	used atomic.Bool
}

// Group starts a group of n members, and returns them.
func (s *Store) Group(n int) []*Member {
	g := &Group{s: s, expected: n, next: &groupWrite{done: make(chan struct{})}}
	ms := make([]*Member, n)
	for i := range ms {
		ms[i] = &Member{g: g}
	}
	return ms
}

// SaveWorkload is Store.SaveWorkload, written with the group's other
// changes.
func (m *Member) SaveWorkload(r Workload) error {
	if !m.used.CompareAndSwap(false, true) {
		return m.g.s.SaveWorkload(r)
	}
	b, err := m.g.s.encodeWorkload(r)
	if err != nil {
		m.g.leave()
		return err
	}
	return m.g.add(journal.Change{Name: r.Spec.Name, Record: b, Owned: true})
}

// Leave says the member will hand no change: the group no longer waits
// for it. After a change, or a Leave before, it does nothing.
func (m *Member) Leave() {
	if m.used.CompareAndSwap(false, true) {
		m.g.leave()
	}
}

// add queues c for the group's next write and waits until it is durable.
func (g *Group) add(c journal.Change) error {
	g.mu.Lock()
	w := g.next
	w.changes = append(w.changes, c)
	g.expected--
	switch {
	case g.expected == 0:
		g.writeLocked(w)
	case len(w.changes) == 1:
		time.AfterFunc(GroupLinger, func() {
			g.mu.Lock()
			if g.next == w {
				g.writeLocked(w)
				return
			}
			g.mu.Unlock()
		})
		g.mu.Unlock()
	default:
		g.mu.Unlock()
	}
	<-w.done
	return w.err
}

// leave is a member gone without a change: the changes waiting go now if
// it was the last one they waited for.
func (g *Group) leave() {
	g.mu.Lock()
	g.expected--
	if w := g.next; g.expected == 0 && len(w.changes) > 0 {
		g.writeLocked(w)
		return
	}
	g.mu.Unlock()
}

// writeLocked writes w, which is g.next, and starts the next write's
// changes. It is called with mu held, and lets it go.
func (g *Group) writeLocked(w *groupWrite) {
	g.next = &groupWrite{done: make(chan struct{})}
	g.mu.Unlock()
	w.err = g.s.specs.PutAll(w.changes)
	close(w.done)
}
