package registryclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Change is one change a watch tells: an instance written (put, as it now
// is) or gone (delete, as it last was), at the registry's revision Rev.
// Synced carries no instance: what came before it is the whole registry
// as of Rev (after the snapshot a watch from 0 starts with, and after a
// relist). Error is the last before the channel closes, with Err.
type Change struct {
	Rev      int64    `json:"rev"`
	Type     string   `json:"type"`
	Instance Instance `json:"instance"`
	Err      error    `json:"-"`
}

// The types of a Change.
const (
	ChangePut    = "put"
	ChangeDelete = "delete"
	ChangeSynced = "synced"
	ChangeError  = "error"
)

// ErrCompacted: the registry no longer keeps the changes after the
// revision asked (410 to a watch): list again, with a watch from 0.
var ErrCompacted = errors.New("registry: the changes after this revision are no longer kept")

const (
	// watchIdle is how long a watch may go without a line (the registry
	// sends an empty one every 15 s) before the connection is taken for
	// dead and the watch resumes on a new one.
	watchIdle = 45 * time.Second
	// maxWatchLine bounds one line of a watch: one instance.
	maxWatchLine = 1 << 20
	// Reconnecting backs off from watchRetryMin to watchRetryMax.
	watchRetryMin = 200 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// wireChange is a line of a watch.
type wireChange struct {
	Rev      int64    `json:"rev"`
	Type     string   `json:"type"`
	Instance Instance `json:"instance"`
	More     bool     `json:"more"`
	Status   int      `json:"status"`
	Error    string   `json:"error"`
}

// Watch follows the registry's changes after revision after: from 0, a
// snapshot of every instance (puts) then a ChangeSynced, then each change
// as it happens. It is an extension of the contract
// (GET /api/v1/services?watch=REV) that the reference registry serves.
//
// The watch resumes on its own after a lost connection, on the same
// replica or the next, from the last revision it delivered whole: no
// change is lost and none is told twice. When the registry no longer
// keeps the changes it needs, it lists again: a put of every instance, a
// delete of each it had told of that is gone, then a ChangeSynced. The
// channel closes when ctx is done, after a ChangeError when the registry
// refuses the watch for good (the key, a registry that cannot watch).
//
// The first request is made before Watch returns, and its failure is
// Watch's error: ErrCompacted when after is no longer kept (the caller
// lists again, from 0).
func (c *Client) Watch(ctx context.Context, after int64) (<-chan Change, error) {
	if after < 0 {
		return nil, errors.New("registry watch: a revision is 0 or more")
	}
	w := &watch{c: c, done: after, known: map[string]bool{}, listing: after == 0}
	body, cancel, err := w.open(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan Change)
	go w.run(ctx, body, cancel, ch)
	return ch, nil
}

type watch struct {
	c    *Client
	done int64 // every change up to done was delivered
	// partial is a revision whose changes were delivered in part (a line
	// said more), with the ids delivered.
	partial    int64
	partialIDs map[string]bool
	// listing: a snapshot is coming, up to its ChangeSynced; listed the
	// ids it put so far. known: the ids delivered as put and not deleted,
	// so that a relist can tell which went.
	listing bool
	listed  map[string]bool
	known   map[string]bool
	idle    *time.Timer
}

// open starts a watch from the current revision on the replica that
// answered last, or the next ones.
func (w *watch) open(ctx context.Context) (io.ReadCloser, context.CancelFunc, error) {
	after := w.done
	if w.listing {
		after, w.listed, w.partial, w.partialIDs = 0, map[string]bool{}, 0, nil
	}
	c := w.c
	first := int(c.cur.Load())
	var err error
	for i := range c.bases {
		n := (first + i) % len(c.bases)
		var body io.ReadCloser
		var cancel context.CancelFunc
		var retry bool
		body, cancel, err, retry = w.try(ctx, c.bases[n], after)
		if err == nil {
			c.cur.Store(uint32(n))
			return body, cancel, nil
		}
		if !retry || ctx.Err() != nil {
			return nil, nil, err
		}
	}
	return nil, nil, err
}

func (w *watch) try(ctx context.Context, base string, after int64) (io.ReadCloser, context.CancelFunc, error, bool) {
	c := w.c
	rctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+pathServices+"?watch="+strconv.FormatInt(after, 10), nil)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("registry watch: %w", err), false
	}
	req.Header.Set("X-API-Key", c.key)
	// Until the answer's headers come, the request has the client's
	// timeout; then the idle timer watches the lines.
	w.idle = time.AfterFunc(c.timeout, cancel)
	resp, err := c.hc.Do(req)
	if err != nil {
		w.idle.Stop()
		cancel()
		return nil, nil, fmt.Errorf("registry watch: %w", err), true
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxWatchLine))
		resp.Body.Close()
		w.idle.Stop()
		cancel()
		retry := resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
		return nil, nil, c.statusError("watch", resp.StatusCode, b, map[int]error{http.StatusGone: ErrCompacted}), retry
	}
	w.idle.Reset(watchIdle)
	return resp.Body, cancel, nil, false
}

// errRelist: the registry no longer keeps what the watch needs.
var errRelist = errors.New("relist")

// run delivers the changes of one connection after another until ctx is
// done or the registry refuses for good.
func (w *watch) run(ctx context.Context, body io.ReadCloser, cancel context.CancelFunc, ch chan<- Change) {
	defer close(ch)
	backoff := watchRetryMin
	for {
		delivered, err := w.read(ctx, body, ch)
		body.Close()
		cancel()
		w.idle.Stop()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRelist) {
			w.listing = true
		}
		if delivered {
			backoff = watchRetryMin
		}
		for {
			if !errors.Is(err, errRelist) {
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, watchRetryMax)
			}
			body, cancel, err = w.open(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			switch {
			case errors.Is(err, ErrCompacted):
				w.listing = true
				err = errRelist
				continue
			case errors.Is(err, ErrUnauthorized), errors.Is(err, ErrBadRequest), isFinal(err):
				select {
				case ch <- Change{Type: ChangeError, Err: err}:
				case <-ctx.Done():
				}
				return
			}
		}
	}
}

// isFinal: a registry that answers a watch 404 or 501 cannot watch.
func isFinal(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.StatusCode == http.StatusNotFound || se.StatusCode == http.StatusNotImplemented)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// read delivers the lines of one connection; delivered says whether it
// had any.
func (w *watch) read(ctx context.Context, body io.Reader, ch chan<- Change) (delivered bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxWatchLine)
	for sc.Scan() {
		w.idle.Reset(watchIdle)
		delivered = true
		line := sc.Bytes()
		if len(line) == 0 {
			continue // the registry's keep-alive
		}
		var l wireChange
		if err := json.Unmarshal(line, &l); err != nil {
			return delivered, fmt.Errorf("registry watch: malformed line: %w", err)
		}
		var out []Change
		switch l.Type {
		case "error":
			if l.Status == http.StatusGone {
				return delivered, errRelist
			}
			return delivered, fmt.Errorf("registry watch: HTTP %d: %s", l.Status, snippet([]byte(l.Error), w.c.key))
		case ChangeSynced:
			if w.listing {
				for id := range w.known {
					if !w.listed[id] {
						out = append(out, Change{Rev: l.Rev, Type: ChangeDelete, Instance: Instance{ID: id}})
					}
				}
				w.known, w.listing, w.listed = w.listed, false, nil
			}
			w.done, w.partial, w.partialIDs = l.Rev, 0, nil
			out = append(out, Change{Rev: l.Rev, Type: ChangeSynced})
		case ChangePut, ChangeDelete:
			id := l.Instance.ID
			if w.listing {
				// A snapshot: its puts are at the revisions the instances
				// were written at, and a lost connection starts it over.
				if l.Type == ChangePut {
					w.listed[id] = true
				}
				out = append(out, Change{Rev: l.Rev, Type: l.Type, Instance: l.Instance})
				break
			}
			if l.Rev <= w.done || l.Rev == w.partial && w.partialIDs[id] {
				continue // told already, before the connection was lost
			}
			if l.Type == ChangePut {
				w.known[id] = true
			} else {
				delete(w.known, id)
			}
			if l.More {
				if w.partial != l.Rev {
					w.partial, w.partialIDs = l.Rev, map[string]bool{}
				}
				w.partialIDs[id] = true
			} else {
				w.done, w.partial, w.partialIDs = l.Rev, 0, nil
			}
			out = append(out, Change{Rev: l.Rev, Type: l.Type, Instance: l.Instance})
		default:
			continue // a line of a later extension
		}
		for _, c := range out {
			select {
			case ch <- c:
			case <-ctx.Done():
				return delivered, ctx.Err()
			}
		}
	}
	if err := sc.Err(); err != nil {
		return delivered, err
	}
	return delivered, io.ErrUnexpectedEOF
}
