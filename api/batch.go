package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// A batch is one request that acts on many workloads: the daemon runs the
// single-workload operations of Backend in parallel, in-process, and
// answers with one Result each. `flyd apply -f DIR` and `flyd stop --all`
// are one batch each, not one request per workload.

// Action is what a batch does to each workload it names.
type Action string

const (
	ActionStart   Action = "start"
	ActionStop    Action = "stop"
	ActionRestart Action = "restart"
	ActionRemove  Action = "remove"
	ActionSignal  Action = "signal"
)

// Batch names the workloads an action applies to: Names, or All of them.
type Batch struct {
	Names []string `json:"names,omitempty"`
	All   bool     `json:"all,omitempty"`
	// Force lets remove take workloads that belong to a file of the
	// workloads directory, as RemoveOptions.Force.
	Force bool `json:"force,omitempty"`
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

// batchParallel bounds the operations a batch runs at once: enough to keep
// every core busy while others wait on a fork or an exit.
const batchParallel = 32

// applyBatch applies specs through b level by level, as their `after`
// lists order them (spec.Order): a level's workloads in parallel, each
// level once the one before it is done. Duplicate names and cycles are
// refused before anything is applied.
func applyBatch(ctx context.Context, b Backend, specs []*spec.Workload, o ApplyOptions) ([]Result, error) {
	levels, err := orderBatch(specs)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, level := range levels {
		rs := make([]Result, len(level))
		parallel(len(level), func(i int) {
			wl, err := b.Apply(ctx, level[i], o)
			rs[i] = result(level[i].Name, wl, err)
		})
		out = append(out, rs...)
	}
	return out, nil
}

// orderBatch refuses a batch that names a workload twice or whose `after`
// lists form a cycle, and sorts it into levels (spec.Order). The client
// runs it too: a batch it splits must be whole and ordered as one.
func orderBatch(specs []*spec.Workload) ([][]*spec.Workload, error) {
	seen := make(map[string]bool, len(specs))
	for _, w := range specs {
		if seen[w.Name] {
			return nil, fmt.Errorf("%w: workload %q is defined twice", errdefs.ErrInvalid, w.Name)
		}
		seen[w.Name] = true
	}
	levels, err := spec.Order(specs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return levels, nil
}

// runBatch runs action on every workload bt names, in parallel. Names the
// daemon does not know get a not_found result each.
func runBatch(ctx context.Context, b Backend, action Action, bt Batch) ([]Result, error) {
	var op func(ctx context.Context, name string) (*Workload, error)
	switch action {
	case ActionStart:
		op = b.Start
	case ActionStop:
		op = b.Stop
	case ActionRestart:
		op = b.Restart
	case ActionRemove:
		op = func(ctx context.Context, name string) (*Workload, error) {
			return nil, b.Remove(ctx, name, RemoveOptions{Force: bt.Force})
		}
	case ActionSignal:
		sig, err := spec.ParseSignal(bt.Signal)
		if err != nil {
			return nil, fmt.Errorf("%w: signal: %v", errdefs.ErrInvalid, err)
		}
		op = func(ctx context.Context, name string) (*Workload, error) {
			return nil, b.Signal(ctx, name, sig)
		}
	default:
		return nil, fmt.Errorf("%w: no batch action %q (start, stop, restart, remove, signal)", errdefs.ErrInvalid, action)
	}
	if bt.Signal != "" && action != ActionSignal {
		return nil, fmt.Errorf("%w: only a signal batch takes a signal", errdefs.ErrInvalid)
	}
	names := bt.Names
	switch {
	case bt.All && len(names) > 0:
		return nil, fmt.Errorf("%w: a batch takes names or all, not both", errdefs.ErrInvalid)
	case bt.All:
		ws, err := b.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			names = append(names, w.Name)
		}
		slices.Sort(names)
	case len(names) == 0:
		return nil, fmt.Errorf("%w: a batch needs names, or all", errdefs.ErrInvalid)
	}
	rs := make([]Result, len(names))
	parallel(len(names), func(i int) {
		wl, err := op(ctx, names[i])
		rs[i] = result(names[i], wl, err)
	})
	return rs, nil
}

func result(name string, wl *Workload, err error) Result {
	r := Result{Name: name}
	switch {
	case err != nil:
		r.Error = toError(err)
	case wl != nil:
		r.State, r.PID = wl.State, wl.PID
		if wl.State == StateFailed {
			r.LastError = wl.LastError
		}
	}
	return r
}

// parallel runs f for 0..n-1, at most batchParallel at a time.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, batchParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// --- server ---

func (s *Server) applyBatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Workloads []json.RawMessage `json:"workloads"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, err)
		return
	}
	specs := make([]*spec.Workload, len(body.Workloads))
	for i, raw := range body.Workloads {
		ws, err := spec.DecodeJSON(bytes.NewReader(raw))
		if err != nil {
			writeError(w, inBatch(i, err))
			return
		}
		specs[i] = ws
	}
	q := r.URL.Query()
	rs, err := applyBatch(r.Context(), s.backend, specs, ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	respond(w, Results{Results: emptyIfNil(rs)}, err)
}

func (s *Server) runBatch(w http.ResponseWriter, r *http.Request) {
	var bt Batch
	if err := decodeStrict(r, &bt); err != nil {
		writeError(w, err)
		return
	}
	rs, err := runBatch(r.Context(), s.backend, Action(r.PathValue("action")), bt)
	respond(w, Results{Results: emptyIfNil(rs)}, err)
}

// decodeStrict reads one JSON value into v, refusing unknown fields.
func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return fmt.Errorf("%w: request body: %v", errdefs.ErrInvalid, err)
	}
	return nil
}

// inBatch points a spec's error at its place in the batch.
func inBatch(i int, err error) error {
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &spec.FieldError{Field: fmt.Sprintf("workloads[%d].%s", i, fe.Field), Msg: fe.Msg}
	}
	return fmt.Errorf("%w: workloads[%d]: %w", errdefs.ErrInvalid, i, err)
}

// --- client ---

// ApplyBatch applies specs in one request, or in as few as the body limit
// allows, sent one after the other in `after` order. Each workload's
// outcome is in its Result; the error is for the batch as a whole.
func (c *Client) ApplyBatch(ctx context.Context, specs []*spec.Workload, o ApplyOptions) ([]Result, error) {
	levels, err := orderBatch(specs)
	if err != nil {
		return nil, err
	}
	q := applyQuery(o)
	var out []Result
	var chunk []json.RawMessage
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var rs Results
		err := c.do(ctx, http.MethodPost, "/v1/batch/apply", q, struct {
			Workloads []json.RawMessage `json:"workloads"`
		}{chunk}, &rs)
		out = append(out, rs.Results...)
		chunk, size = nil, 0
		return err
	}
	for _, level := range levels {
		for _, w := range level {
			b, err := json.Marshal(w)
			if err != nil {
				return out, err
			}
			// Room for the envelope; a spec alone over the limit goes on
			// its own, for the daemon to refuse with too_large.
			if size+len(b)+64 > MaxBodyBytes {
				if err := flush(); err != nil {
					return out, err
				}
			}
			chunk, size = append(chunk, b), size+len(b)+1
		}
	}
	return out, flush()
}

// Batch runs action on the workloads bt names, in one request.
func (c *Client) Batch(ctx context.Context, action Action, bt Batch) ([]Result, error) {
	var rs Results
	err := c.do(ctx, http.MethodPost, "/v1/batch/"+string(action), nil, bt, &rs)
	return rs.Results, err
}
