package registryclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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

// ExtensionsHeader is the response header in which a registry announces
// the extensions of the contract it takes (flyd's registry does on every
// answer to the key): a comma-separated list of names.
const ExtensionsHeader = "Flyd-Registry-Extensions"

// The extensions a registry may announce.
const (
	ExtBatchHeartbeat = "batch-heartbeat"
	ExtBatchRegister  = "batch-register"
	ExtWatch          = "watch"
)

// Bits of Client.ext.
const (
	extKnown uint32 = 1 << iota // a registry answered: the rest is what it said
	extBatchHeartbeat
	extBatchRegister
	extWatch
)

// Extensions is what the registry announced it takes beyond the contract.
// Nothing is known until it answered a request; a registry that announces
// nothing is spoken to in the contract alone.
type Extensions struct {
	Known          bool // a registry answered, so the rest is what it announced
	BatchHeartbeat bool // {"ids": [...]} on the heartbeat route
	BatchRegister  bool // {"instances": [...]} on the register route
	Watch          bool // ?watch=REV on the list route
}

// Extensions returns what the registry's last successful answer announced.
func (c *Client) Extensions() Extensions {
	v := c.ext.Load()
	return Extensions{
		Known:          v&extKnown != 0,
		BatchHeartbeat: v&extBatchHeartbeat != 0,
		BatchRegister:  v&extBatchRegister != 0,
		Watch:          v&extWatch != 0,
	}
}

// announced records the extensions a successful answer names: each
// answer says it anew, so a registry replaced by one that does not take
// them (another replica, an older version) is spoken to in the contract
// from its first answer on.
func (c *Client) announced(h http.Header) {
	v := extKnown
	for _, line := range h.Values(ExtensionsHeader) {
		for _, name := range strings.Split(line, ",") {
			switch strings.TrimSpace(name) {
			case ExtBatchHeartbeat:
				v |= extBatchHeartbeat
			case ExtBatchRegister:
				v |= extBatchRegister
			case ExtWatch:
				v |= extWatch
			}
		}
	}
	c.ext.Store(v)
}

// notUnderstood forgets an extension the registry announced but did not
// take: a request of it answered with a status other than the ones it
// defines (200, 401/403, 5xx), or 200 without results. The next answer
// that announces it again brings it back.
func (c *Client) notUnderstood(bit uint32) {
	for {
		v := c.ext.Load()
		if c.ext.CompareAndSwap(v, v&^bit) {
			return
		}
	}
}

// misread reports whether err, the answer to a batch request, means the
// registry did not take the batch: a status of its own (400, 404, 410,
// ...) that only the contract's single form defines. A refused key, a
// registry that cannot answer, and a transport failure are errors of
// every id, as they would be one by one.
func misread(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch {
	case se.StatusCode == http.StatusUnauthorized, se.StatusCode == http.StatusForbidden:
		return false
	case se.StatusCode >= 500:
		return false
	}
	return true
}

// beatResult is the registry's answer for one id of a batch heartbeat.
type beatResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// HeartbeatMany renews the leases of ids (R3) in as few requests as the
// registry allows: one batch heartbeat `{"ids": [...]}` per MaxBatch ids
// once the registry announced it takes them (ExtBatchHeartbeat), else a
// contract heartbeat per id. Before the registry has answered anything,
// the first id goes alone and its answer says how the rest go. A batch
// the registry does not take (an answer without results, or a status
// only the contract's single form defines, like 400 or 410) is sent again
// one id at a time: a 410 to a batch never means that its ids are gone.
// The result is an error per id, in order: nil, ErrGone (register again),
// or why that id could not be renewed.
func (c *Client) HeartbeatMany(ctx context.Context, ids []string) []error {
	errs := make([]error, len(ids))
	start := 0
	if len(ids) > 0 && !c.Extensions().Known {
		errs[0] = c.Heartbeat(ctx, ids[0])
		start = 1
	}
	plain := false // the registry did not take a batch of this call
	for start < len(ids) {
		if plain || !c.Extensions().BatchHeartbeat {
			for i := start; i < len(ids); i++ {
				errs[i] = c.Heartbeat(ctx, ids[i])
			}
			break
		}
		chunk := ids[start:min(start+MaxBatch, len(ids))]
		var out struct {
			Results *[]beatResult `json:"results"`
		}
		err := c.do(ctx, "heartbeat", http.MethodPost, pathHeartbeat, struct {
			IDs []string `json:"ids"`
		}{chunk}, &out, nil)
		if misread(err) || (err == nil && out.Results == nil) {
			c.notUnderstood(extBatchHeartbeat)
			plain = true
			continue // again, one by one
		}
		var res []beatResult
		if err == nil {
			res = *out.Results
			if len(res) != len(chunk) {
				err = fmt.Errorf("registry heartbeat: malformed answer: %d results for %d ids", len(res), len(chunk))
			}
		}
		for i, id := range chunk {
			switch {
			case err != nil:
				errs[start+i] = err
			case res[i].ID != id:
				errs[start+i] = fmt.Errorf("registry heartbeat: malformed answer: result %d is for %q, not %q", i, snippet([]byte(res[i].ID), c.key), id)
			case res[i].Status == http.StatusOK:
			default:
				r := res[i]
				errs[start+i] = &StatusError{Op: "heartbeat", StatusCode: r.Status, Message: snippet([]byte(r.Error), c.key),
					kind: map[int]error{http.StatusGone: ErrGone}[r.Status]}
			}
		}
		start += len(chunk)
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

// RegisterMany upserts ins (R2) in as few requests as the registry
// allows: batch registers `{"instances": [...]}` of at most MaxBatch
// instances and MaxBatchBytes once the registry announced it takes them
// (ExtBatchRegister), else a contract register per instance. Before the
// registry has answered anything, the first instance goes alone and its
// answer says how the rest go. A batch the registry does not take (an
// answer without results, as from one that ignores the unknown field, or
// a status only the single form defines) is sent again one instance at a
// time. The result is an error per instance, in order: nil, or why that
// instance could not be registered, as Register would have said it.
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
	start := 0
	if len(ins) > 0 && errs[0] == nil && !c.Extensions().Known {
		_, _, errs[0] = c.Register(ctx, ins[0])
		start = 1
	}
	plain := false // the registry did not take a batch of this call
	for start < len(ins) {
		if plain || !c.Extensions().BatchRegister {
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
			Results *[]registerResult `json:"results"`
		}
		err := c.do(ctx, "register", http.MethodPost, pathRegister, struct {
			Instances []json.RawMessage `json:"instances"`
		}{chunk}, &out, nil)
		if misread(err) || (err == nil && out.Results == nil) {
			c.notUnderstood(extBatchRegister)
			plain = true
			continue // again, one by one
		}
		var res []registerResult
		if err == nil {
			res = *out.Results
			if len(res) != len(chunk) {
				err = fmt.Errorf("registry register: malformed answer: %d results for %d instances", len(res), len(chunk))
			}
		}
		for k, i := range at {
			switch {
			case err != nil:
				errs[i] = err
			case ins[i].ID != "" && res[k].ID != ins[i].ID:
				errs[i] = fmt.Errorf("registry register: malformed answer: result %d is for %q, not %q", k, snippet([]byte(res[k].ID), c.key), ins[i].ID)
			case res[k].Status == http.StatusOK:
			default:
				errs[i] = c.statusError("register", res[k].Status, []byte(res[k].Error), nil)
			}
		}
		start = end
	}
	return errs
}
