package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// up serves PUT /v1/projects/{name}: the project becomes what the body's
// documents say. The change is answered whole, with what failed of it.
func (s *Server) up(w http.ResponseWriter, r *http.Request) {
	if !s.admitApply(w, r) {
		return
	}
	defer s.doneApply(r)
	var body struct {
		Workloads  []json.RawMessage `json:"workloads"`
		Networks   []json.RawMessage `json:"networks"`
		Policies   []json.RawMessage `json:"policies"`
		Workspaces []json.RawMessage `json:"workspaces"`
		Keep       []string          `json:"keep"`
	}
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, err)
		return
	}
	var docs api.Documents
	for i, raw := range body.Workloads {
		ws, err := spec.DecodeJSON(bytes.NewReader(raw))
		if err == nil {
			err = s.checkSpec(r, ws)
		}
		if err != nil {
			writeError(w, inBatch(i, err))
			return
		}
		docs.Workloads = append(docs.Workloads, ws)
	}
	for i, raw := range body.Networks {
		n, err := spec.DecodeNetworkJSON(bytes.NewReader(raw))
		if err == nil {
			err = s.checkDocument(r, authz.Apply, spec.KindNetwork, n.Name)
		}
		if err != nil {
			writeError(w, fmt.Errorf("%w: networks[%d]: %w", errdefs.ErrInvalid, i, err))
			return
		}
		docs.Networks = append(docs.Networks, n)
	}
	for i, raw := range body.Policies {
		p, err := spec.DecodePolicyJSON(bytes.NewReader(raw))
		if err == nil {
			err = s.checkDocument(r, authz.Apply, spec.KindPolicy, p.Name)
		}
		if err != nil {
			writeError(w, fmt.Errorf("%w: policies[%d]: %w", errdefs.ErrInvalid, i, err))
			return
		}
		docs.Policies = append(docs.Policies, p)
	}
	for i, raw := range body.Workspaces {
		ws, err := spec.DecodeWorkspaceJSON(bytes.NewReader(raw))
		if err == nil {
			err = s.checkDocument(r, authz.Apply, spec.KindWorkspace, ws.Name)
		}
		if err != nil {
			writeError(w, fmt.Errorf("%w: workspaces[%d]: %w", errdefs.ErrInvalid, i, err))
			return
		}
		docs.Workspaces = append(docs.Workspaces, ws)
	}
	docs.Keep = body.Keep
	q := r.URL.Query()
	c, err := s.backend.Up(r.Context(), r.PathValue("name"), docs, api.ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	respondChange(w, c, err)
}

// down serves DELETE /v1/projects/{name}; ?volumes=true removes the
// project's named volumes too.
func (s *Server) down(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := s.backend.Down(r.Context(), r.PathValue("name"), api.RemoveOptions{Force: q.Get("force") == "true", Volumes: q.Get("volumes") == "true"})
	respondChange(w, c, err)
}

// respondChange answers a change that did nothing with its error, and
// one that did something with what it did, and what failed of it.
func respondChange(w http.ResponseWriter, c *api.ProjectChange, err error) {
	if c == nil {
		writeError(w, err)
		return
	}
	if err != nil {
		c.Error = toError(err)
	}
	c.Applied, c.Removed = emptyIfNil(c.Applied), emptyIfNil(c.Removed)
	respond(w, c, nil)
}
