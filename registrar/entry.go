package registrar

import (
	"container/heap"
	"context"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// op is a request to the registry.
type op uint8

const (
	opNone op = iota
	opRegister
	opHeartbeat
	opDeregister
)

func (o op) String() string {
	switch o {
	case opRegister:
		return "register"
	case opHeartbeat:
		return "heartbeat"
	case opDeregister:
		return "deregister"
	default:
		return "none"
	}
}

// entry is one instance id: what the daemon wants of it and what the
// registrar believes the registry holds. It lives until it is neither
// desired nor possibly held by the registry.
type entry struct {
	id    string
	owner string

	desired bool
	want    registryclient.Instance // replaced on change, never mutated
	gen     uint64                  // bumped whenever want changes

	// registered: the registry acknowledged want at regGen and has not
	// answered 410 since; renewedAt is its last acknowledgement.
	registered bool
	regGen     uint64
	renewedAt  time.Time
	lease      time.Duration
	// held: the registry may hold the id. It outlives registered because a
	// register that timed out may still have landed, and a removed instance
	// must then be deregistered rather than left to the reaper.
	held bool

	next     time.Time
	index    int // in the queue; -1 while in flight or dropped
	inflight op
	cancel   context.CancelFunc // of the request in flight
	// superseded: a Set cancelled the request in flight; its error is ours,
	// not the registry's, however the client wrapped it.
	superseded bool

	failures int   // consecutive failed requests
	failing  class // class of the last failure; classOK when healthy
}

// due is what the entry needs next, decided now and not when it was
// queued: that is what makes the registrar level-triggered.
func (e *entry) due(now time.Time) op {
	switch {
	case !e.desired && e.held:
		return opDeregister
	case !e.desired:
		return opNone
	case !e.registered || e.regGen != e.gen || now.Sub(e.renewedAt) >= e.lease:
		// A lease we could not renew in time has been reaped (or soon
		// will be): register outright instead of spending a heartbeat on
		// the 410. Register is an upsert, so this is never wrong.
		return opRegister
	default:
		return opHeartbeat
	}
}

// slack is how early e may be taken along with work due before it.
func (e *entry) slack() time.Duration { return min(maxSlack, e.lease/30) }

// queue is a min-heap of entries by next due time.
type queue []*entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}

// at queues e for t, or moves it there if queued. An entry in flight is
// left alone: its result decides what comes next.
func (q *queue) at(e *entry, t time.Time) {
	switch {
	case e.inflight != opNone:
	case e.index >= 0:
		e.next = t
		heap.Fix(q, e.index)
	default:
		e.next = t
		heap.Push(q, e)
	}
}

// earlier is at, but only when t comes before the current due time.
func (q *queue) earlier(e *entry, t time.Time) {
	if e.index >= 0 && !t.Before(e.next) {
		return
	}
	q.at(e, t)
}

func (q *queue) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(q, e.index)
	}
}
