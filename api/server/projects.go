package server

import (
	"fmt"
	"net/http"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
)

// up serves PUT /v1/projects/{name}: the project becomes what the body's
// documents say. The change is answered whole, with what failed of it.
func (s *Server) up(w http.ResponseWriter, r *http.Request) {
	if !s.admitApply(w, r) {
		return
	}
	defer s.doneApply(r)
	var docs api.Documents
	if err := decodeStrict(r, &docs); err != nil {
		writeError(w, err)
		return
	}
	for i, ws := range docs.Workloads {
		if err := s.checkSpec(r, ws); err != nil {
			writeError(w, inBatch(i, err))
			return
		}
	}
	for _, d := range docs.Docs {
		if err := s.checkDocument(r, authz.Apply, d.DocKind(), d.DocName()); err != nil {
			writeError(w, fmt.Errorf("%s %s: %w", d.DocKind(), d.DocName(), err))
			return
		}
	}
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
