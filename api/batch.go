package api

import (
	"context"
	"encoding/json"

	"github.com/flyd-dev/flyd/internal/par"
	"github.com/flyd-dev/flyd/spec"
)

// A batch is one request that acts on many workloads: the daemon runs the
// single-workload operations in parallel, in-process, and answers with one
// Result each. `flyd apply -f DIR` and `flyd stop --all` are one batch
// each, not one request per workload.

// Action is what a batch does to each workload it names.
type Action string

const (
	ActionStart   Action = "start"
	ActionStop    Action = "stop"
	ActionRestart Action = "restart"
	ActionRemove  Action = "remove"
	ActionSignal  Action = "signal"
	ActionReload  Action = "reload"
)

// Batch names the workloads an action applies to: Names, or All of them.
type Batch struct {
	Names []string `json:"names,omitempty"`
	// All is every workload (of the caller's, for one other than root);
	// with InProject, every workload of Project ("" the default project).
	All       bool   `json:"all,omitempty"`
	InProject bool   `json:"in_project,omitempty"`
	Project   string `json:"project,omitempty"`
	// Force lets remove take workloads that belong to a file of the
	// workloads directory, as RemoveOptions.Force; it makes stop a kill,
	// without a grace period and overtaking a stop in progress.
	Force bool `json:"force,omitempty"`
	// Parallel stops or removes every workload at once; without it,
	// dependents go before what they depend on (their after and uses).
	Parallel bool `json:"parallel,omitempty"`
	// Signal is what signal sends: a name (HUP, SIGHUP) or a number.
	Signal string `json:"signal,omitempty"`
}

// Result is one workload's outcome in a batch: its state and pid after
// the operation, or the error that stopped it.
type Result struct {
	Name  string `json:"name"`
	State State  `json:"state,omitempty"`
	PID   int    `json:"pid,omitempty"`
	// LastError says why a workload in state failed cannot run.
	LastError string `json:"last_error,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// Err is the result's error, nil when the operation succeeded.
func (r Result) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Results is the answer to a batch.
type Results struct {
	Results []Result `json:"results"`
}

// ResultOf is the result of one workload's operation in a batch: its state
// after it, or the error that stopped it.
func ResultOf(name string, wl *Workload, err error) Result {
	r := Result{Name: name}
	switch {
	case err != nil:
		r.Error = ErrorOf(err)
	case wl != nil:
		r.State, r.PID = wl.State, wl.PID
		if wl.State == StateFailed {
			r.LastError = wl.LastError
		}
	}
	return r
}

// ApplyBatch applies specs in one request, or in as few as the body limit
// allows, sent one after the other in `after` order. Each workload's
// outcome is in its Result; the error is for the batch as a whole.
func (c *Client) ApplyBatch(ctx context.Context, specs []*spec.Workload, o ApplyOptions) ([]Result, error) {
	levels, err := spec.OrderBatch(specs)
	if err != nil {
		return nil, err
	}
	var ordered []*spec.Workload
	for _, level := range levels {
		ordered = append(ordered, level...)
	}
	// Encoded on every core; sent in order.
	encoded := make([][]byte, len(ordered))
	errs := make([]error, len(ordered))
	par.Each(len(ordered), 0, func(i int) { encoded[i], errs[i] = json.Marshal(ordered[i]) })
	q := applyQuery(o)
	var out []Result
	body := []byte(`{"workloads":[`)
	flush := func() error {
		if body[len(body)-1] == '[' {
			return nil
		}
		var rs Results
		err := c.do(ctx, "POST", "/v1/batch/apply", q, encodedBody(append(body, "]}"...)), &rs)
		out = append(out, rs.Results...)
		body = body[:len(`{"workloads":[`)]
		return err
	}
	for i, b := range encoded {
		if errs[i] != nil {
			return out, errs[i]
		}
		// Room for the envelope; a spec alone over the limit goes on
		// its own, for the daemon to refuse with too_large.
		if len(body)+len(b)+64 > MaxBodyBytes {
			if err := flush(); err != nil {
				return out, err
			}
		}
		if body[len(body)-1] != '[' {
			body = append(body, ',')
		}
		body = append(body, b...)
	}
	return out, flush()
}

// Batch runs action on the workloads bt names, in one request.
func (c *Client) Batch(ctx context.Context, action Action, bt Batch) ([]Result, error) {
	var rs Results
	err := c.do(ctx, "POST", "/v1/batch/"+string(action), nil, bt, &rs)
	return rs.Results, err
}
