package registryclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// MaxBatch is the most ids one batch heartbeat carries; HeartbeatMany
// sends more in several requests.
const MaxBatch = 500

// beatResult is the registry's answer for one id of a batch heartbeat.
type beatResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// HeartbeatMany renews the leases of ids (R3) in as few requests as it
// can, with the batch heartbeat `{"ids": [...]}` the contract's registries
// may not know: one that answers it 400 (an unknown field) gets a
// heartbeat per id, from then on. The result is an error per id, in order:
// nil, ErrGone (register again), or why that id could not be renewed.
func (c *Client) HeartbeatMany(ctx context.Context, ids []string) []error {
	errs := make([]error, len(ids))
	for start := 0; start < len(ids); start += MaxBatch {
		chunk := ids[start:min(start+MaxBatch, len(ids))]
		if c.noBatch.Load() {
			for i, id := range chunk {
				errs[start+i] = c.Heartbeat(ctx, id)
			}
			continue
		}
		var out struct {
			Results []beatResult `json:"results"`
		}
		err := c.do(ctx, "heartbeat", http.MethodPost, pathHeartbeat, struct {
			IDs []string `json:"ids"`
		}{chunk}, &out, map[int]error{http.StatusGone: ErrGone})
		if errors.Is(err, ErrBadRequest) {
			c.noBatch.Store(true)
			start -= MaxBatch // again, one by one
			continue
		}
		if err == nil && len(out.Results) != len(chunk) {
			err = fmt.Errorf("registry heartbeat: malformed answer: %d results for %d ids", len(out.Results), len(chunk))
		}
		for i, id := range chunk {
			switch {
			case err != nil:
				errs[start+i] = err
			case out.Results[i].ID != id:
				errs[start+i] = fmt.Errorf("registry heartbeat: malformed answer: result %d is for %q, not %q", i, snippet([]byte(out.Results[i].ID), c.key), id)
			case out.Results[i].Status == http.StatusOK:
			default:
				r := out.Results[i]
				errs[start+i] = &StatusError{Op: "heartbeat", StatusCode: r.Status, Message: snippet([]byte(r.Error), c.key),
					kind: map[int]error{http.StatusGone: ErrGone}[r.Status]}
			}
		}
	}
	return errs
}
