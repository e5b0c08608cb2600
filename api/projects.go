package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Documents are a project's documents, as its files say.
type Documents struct {
	Workloads  []*spec.Workload  `json:"workloads,omitempty"`
	Networks   []*spec.Network   `json:"networks,omitempty"`
	Policies   []*spec.Policy    `json:"policies,omitempty"`
	Workspaces []*spec.Workspace `json:"workspaces,omitempty"`
	// Keep names workloads the files define that this up leaves out (by
	// profile): kept as they are, not removed, as compose leaves them.
	Keep []string `json:"keep,omitempty"`
}

// ProjectChange is what an up or a down did to a project: the outcome of
// each workload applied and removed, and the networks and policies
// removed, and the named volumes removed (down --volumes), by full name
// (PROJECT.NAME).
type ProjectChange struct {
	Applied    []Result `json:"applied"`
	Removed    []Result `json:"removed"`
	Networks   []string `json:"networks,omitempty"`
	Policies   []string `json:"policies,omitempty"`
	Workspaces []string `json:"workspaces,omitempty"`
	Volumes    []string `json:"volumes,omitempty"`
	// Error is what failed of the change as a whole, after what it did.
	Error *Error `json:"error,omitempty"`
}

// Err is the change's error, nil when all of it was done.
func (c *ProjectChange) Err() error {
	if c == nil || c.Error == nil {
		return nil
	}
	return c.Error
}

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
	var docs Documents
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
	c, err := s.backend.Up(r.Context(), r.PathValue("name"), docs, ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	respondChange(w, c, err)
}

// down serves DELETE /v1/projects/{name}; ?volumes=true removes the
// project's named volumes too.
func (s *Server) down(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := s.backend.Down(r.Context(), r.PathValue("name"), RemoveOptions{Force: q.Get("force") == "true", Volumes: q.Get("volumes") == "true"})
	respondChange(w, c, err)
}

// respondChange answers a change that did nothing with its error, and
// one that did something with what it did, and what failed of it.
func respondChange(w http.ResponseWriter, c *ProjectChange, err error) {
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

// Up makes a project what docs say: what the project has and docs do not
// is removed. The change's own failure, after what it did, is its Err.
func (c *Client) Up(ctx context.Context, project string, docs Documents, o ApplyOptions) (*ProjectChange, error) {
	var out ProjectChange
	if err := c.do(ctx, http.MethodPut, "/v1/projects/"+url.PathEscape(project), applyQuery(o), docs, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Down removes everything of a project.
func (c *Client) Down(ctx context.Context, project string, o RemoveOptions) (*ProjectChange, error) {
	q := url.Values{}
	if o.Force {
		q.Set("force", "true")
	}
	if o.Volumes {
		q.Set("volumes", "true")
	}
	var out ProjectChange
	if err := c.do(ctx, http.MethodDelete, "/v1/projects/"+url.PathEscape(project), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
