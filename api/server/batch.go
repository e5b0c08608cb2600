package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/par"
	"github.com/flyd-dev/flyd/spec"
)

func (s *Server) applyBatch(w http.ResponseWriter, r *http.Request) {
	if !s.admitApply(w, r) {
		return
	}
	defer s.doneApply(r)
	var body struct {
		Workloads []json.RawMessage `json:"workloads"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if c := s.callerOf(r); c.Confined && len(body.Workloads) > s.shares.Workloads {
		writeError(w, fmt.Errorf("%w: this change is %d workloads: a caller other than root (uid %d) holds at most %d, its share (--peer-max-workloads)", errdefs.ErrForbidden, len(body.Workloads), c.UID, s.shares.Workloads))
		return
	}
	// Decoded on every core; the first spec refused, in the body's
	// order, refuses the batch.
	specs := make([]*spec.Workload, len(body.Workloads))
	errs := make([]error, len(body.Workloads))
	par.Each(len(specs), 0, func(i int) {
		if specs[i], errs[i] = spec.DecodeJSON(bytes.NewReader(body.Workloads[i])); errs[i] == nil {
			errs[i] = s.checkSpec(r, specs[i])
		}
	})
	for i, err := range errs {
		if err != nil {
			writeError(w, inBatch(i, err))
			return
		}
	}
	release, err := s.holdShare(r, specs, replacing(specs))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	q := r.URL.Query()
	rs, err := s.backend.ApplyBatch(r.Context(), specs, api.ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	respond(w, api.Results{Results: emptyIfNil(rs)}, err)
}

func (s *Server) runBatch(w http.ResponseWriter, r *http.Request) {
	var bt api.Batch
	if err := decodeStrict(r, &bt); err != nil {
		writeError(w, err)
		return
	}
	rs, err := s.backend.Batch(r.Context(), api.Action(r.PathValue("action")), bt)
	respond(w, api.Results{Results: emptyIfNil(rs)}, err)
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
		return fmt.Errorf("%w: request body: %w", errdefs.ErrInvalid, err)
	}
	return nil
}

// inBatch points a spec's error at its place in the batch.
func inBatch(i int, err error) error {
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &spec.FieldError{Field: fmt.Sprintf("workloads[%d].%s", i, fe.Field), Msg: fe.Msg}
	}
	var ae *api.Error
	if errors.As(err, &ae) && ae.Field != "" {
		return &api.Error{Status: ae.Status, Code: ae.Code, Field: fmt.Sprintf("workloads[%d].%s", i, ae.Field), Message: ae.Message}
	}
	return fmt.Errorf("%w: workloads[%d]: %w", errdefs.ErrInvalid, i, err)
}
