package server

import (
	"fmt"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
)

// quota bounds what the peers other than root hold at once of one thing
// (connections, streams, applies): in all, and each user. Root is never
// counted nor refused: nothing another user does keeps root from the
// daemon, and no one user keeps the others out.
type quota struct {
	what            string // "connections", "streams", …, for the refusal
	max, maxPerUser int

	mu      sync.Mutex // guards total and perUser; nothing is taken under it
	total   int
	perUser map[uint32]int
}

func newQuota(what string, max, maxPerUser int) *quota {
	return &quota{what: what, max: max, maxPerUser: maxPerUser, perUser: map[uint32]int{}}
}

// take counts one in for uid, or says why not (errdefs.ErrUnavailable); a
// nil answer must be followed by give.
func (q *quota) take(uid uint32) error {
	if uid == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.perUser[uid] >= q.maxPerUser:
		return fmt.Errorf("%w: uid %d holds %d %s, the most one user other than root may", errdefs.ErrUnavailable, uid, q.maxPerUser, q.what)
	case q.total >= q.max:
		return fmt.Errorf("%w: %d %s are open, the most this daemon serves to users other than root", errdefs.ErrUnavailable, q.max, q.what)
	}
	q.total++
	q.perUser[uid]++
	return nil
}

func (q *quota) give(uid uint32) {
	if uid == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	if q.perUser[uid]--; q.perUser[uid] == 0 {
		delete(q.perUser, uid)
	}
}
