package registryclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// MaxBatch is the most ids one batch heartbeat carries, and the most
// instances of one batch register; HeartbeatMany and RegisterMany send
// more in several requests.
const MaxBatch = 500

// MaxBatchBytes bounds the body of one batch register, well under what
// a registry takes in one request (64 KiB for flyd's): RegisterMany
// starts another request rather than cross it.
const MaxBatchBytes = 48 << 10

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

// registerResult is the registry's answer for one instance of a batch
// register.
type registerResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// RegisterMany upserts ins (R2) in as few requests as it can, with the
// batch register `{"instances": [...]}` the contract's registries may not
// know: one that answers it 400 (an unknown field) gets a register per
// instance, from then on. The result is an error per instance, in order:
// nil, or why that instance could not be registered, as Register would
// have said it.
func (c *Client) RegisterMany(ctx context.Context, ins []Instance) []error {
	errs := make([]error, len(ins))
	bodies := make([]json.RawMessage, len(ins))
	for i := range ins {
		in := ins[i]
		in.RegisteredAt, in.UpdatedAt = time.Time{}, time.Time{} // the server stamps them
		b, err := json.Marshal(in)
		if err != nil {
			errs[i] = fmt.Errorf("registry register: encoding the request: %w", err)
		}
		bodies[i] = b
	}
	for start := 0; start < len(ins); {
		if c.noBatchRegister.Load() {
			for i := start; i < len(ins); i++ {
				if errs[i] == nil {
					_, _, errs[i] = c.Register(ctx, ins[i])
				}
			}
			break
		}
		// As many as fit in a request, and at least one.
		var at []int
		var chunk []json.RawMessage
		end, size := start, 0
		for ; end < len(ins) && len(chunk) < MaxBatch; end++ {
			if errs[end] != nil {
				continue
			}
			if len(chunk) > 0 && size+len(bodies[end])+1 > MaxBatchBytes {
				break
			}
			size += len(bodies[end]) + 1
			chunk, at = append(chunk, bodies[end]), append(at, end)
		}
		if len(chunk) == 0 {
			start = end
			continue
		}
		var out struct {
			Results []registerResult `json:"results"`
		}
		err := c.do(ctx, "register", http.MethodPost, pathRegister, struct {
			Instances []json.RawMessage `json:"instances"`
		}{chunk}, &out, nil)
		if errors.Is(err, ErrBadRequest) {
			c.noBatchRegister.Store(true)
			continue // again, one by one
		}
		if err == nil && len(out.Results) != len(chunk) {
			err = fmt.Errorf("registry register: malformed answer: %d results for %d instances", len(out.Results), len(chunk))
		}
		for k, i := range at {
			switch r := out.Results; {
			case err != nil:
				errs[i] = err
			case ins[i].ID != "" && r[k].ID != ins[i].ID:
				errs[i] = fmt.Errorf("registry register: malformed answer: result %d is for %q, not %q", k, snippet([]byte(r[k].ID), c.key), ins[i].ID)
			case r[k].Status == http.StatusOK:
			default:
				errs[i] = c.statusError("register", r[k].Status, []byte(r[k].Error), nil)
			}
		}
		start = end
	}
	return errs
}
