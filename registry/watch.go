package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Change is one line of a watch: an instance written (put) or gone
// (delete), at the store's revision Rev. A put carries the instance as it
// now is; a delete, as it last was. A heartbeat is not a change: a put's
// updated_at is when the instance was last written.
type Change struct {
	Rev      int64    `json:"rev"`
	Type     string   `json:"type"`
	Instance Instance `json:"instance"`
}

// The types of a Change. Synced is no change: it ends the snapshot a
// watch from revision 0 starts with, at the revision the snapshot is of.
const (
	ChangePut    = "put"
	ChangeDelete = "delete"
	ChangeSynced = "synced"
)

// ErrCompacted: the store no longer has the changes after the revision a
// watch asked for (etcd compacted them, the memory store's history is
// shorter, or the registry restarted without them). The watcher lists
// again: a watch from revision 0.
var ErrCompacted = errors.New("the changes after this revision are no longer kept: watch from revision 0 to list again")

// Watcher is a Store that can tell its changes. Watch calls send with the
// changes after revision after, in order, grouped so that a group holds
// every change of its revisions, until ctx is done (nil), send fails (its
// error) or the store cannot go on (ErrCompacted, ErrUnavailable). From
// revision 0 the first group is a snapshot: every live instance as a put
// at the revision it was last written, oldest first, then a ChangeSynced
// at the revision the snapshot is of. Resuming from any revision seen
// loses nothing, as long as the store still keeps what follows it.
//
// Watch sends an empty group once it has accepted the revision (from 0,
// the snapshot is that), and nothing before: a revision it no longer
// keeps is ErrCompacted before anything is sent, so that a watch asked
// over HTTP answers it 410 rather than beginning a stream.
type Watcher interface {
	Watch(ctx context.Context, after int64, send func([]Change) error) error
}

// watchKeepAlive is how often an idle watch sends an empty line, so that
// a client can tell a quiet registry from a dead connection.
const watchKeepAlive = 15 * time.Second

// watchWriteTimeout bounds each write of a watch: a watcher that does not
// read is dropped, and resumes when it comes back.
const watchWriteTimeout = 30 * time.Second

// wireChange is a Change on the wire. More says another change of the
// same revision follows: a watcher that lost the connection before the
// last of them resumes from the revision before, not from this one.
type wireChange struct {
	Change
	More bool `json:"more,omitempty"`
}

// watchError is the last line of a watch that the registry ends: the
// status a new watch from the same revision would be answered with.
type watchError struct {
	Type   string `json:"type"` // "error"
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// watch serves GET /api/v1/services?watch=REV: the changes after REV, one
// JSON line each, until the client goes or the registry stops; from 0, a
// snapshot first. An extension: the contract's clients never ask for it.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, raw string) {
	after, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || after < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter watch=%q is not a revision (0 or more)", raw))
		return
	}
	q := r.URL.Query()
	if q.Has("detail") || q.Has("healthy_only") {
		writeError(w, http.StatusBadRequest, "watch takes no other parameter: it tells every instance, healthy or not, in full")
		return
	}
	wt, ok := s.store.(Watcher)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this registry's store cannot be watched")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()

	rc := http.NewResponseController(w)
	var mu sync.Mutex // the keep-alive and the changes write in turn
	started := false
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	send := func(cs []Change) error {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for i, c := range cs {
			if c.Type == ChangeSynced {
				c.Instance = Instance{}
			}
			_ = enc.Encode(wireChange{Change: c, More: i+1 < len(cs) && cs[i+1].Rev == c.Rev && cs[i+1].Type != ChangeSynced})
		}
		return write(buf.Bytes())
	}
	var keep sync.WaitGroup
	keep.Go(func() {
		t := time.NewTicker(watchKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if write([]byte("\n")) != nil {
					cancel()
					return
				}
			}
		}
	})
	err = wt.Watch(ctx, after, send)
	gone := ctx.Err() != nil
	cancel()
	keep.Wait()
	if err == nil || gone {
		return // the watcher went, or the registry stops: it resumes
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrCompacted):
		status = http.StatusGone
	case errors.Is(err, ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	mu.Lock()
	begun := started
	mu.Unlock()
	if !begun {
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, status, "watch: "+err.Error())
		return
	}
	b, _ := json.Marshal(watchError{Type: "error", Status: status, Error: "watch: " + err.Error()})
	_ = write(append(b, '\n'))
}
