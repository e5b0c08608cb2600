package server

import (
	"fmt"
	"net/http"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
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
	if err := s.overShare(r, docs.Workloads); err != nil {
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
	release, err := s.holdShare(r, docs.Workloads, replacingProject(r.PathValue("name"), docs.Keep))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
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

// hold serves POST /v1/projects/{name}/hold: the project is bound to the
// caller while the request lasts, and its grace after. A first line says
// the binding is recorded; nothing more is written. It is a stream, and
// counts as one in a peer's share.
func (s *Server) hold(w http.ResponseWriter, r *http.Request) {
	o, err := api.ParseLeaseOptions(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.openStream(w, r) {
		return
	}
	defer s.closeStream(r)
	release, err := s.backend.Hold(r.Context(), r.PathValue("name"), o)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fw := flushWriter{w: w, rc: http.NewResponseController(w)}
	if _, err := fmt.Fprintf(fw, "{\"project\":%q,\"held\":true}\n", r.PathValue("name")); err != nil {
		return
	}
	<-r.Context().Done() // the client went away, or the daemon is stopping
}

// lease serves PUT /v1/projects/{name}/lease?ttl=D: the project bound to
// the caller until D from now; without ttl, unbound.
func (s *Server) lease(w http.ResponseWriter, r *http.Request) {
	o, err := api.ParseLeaseOptions(r.URL.Query())
	if err == nil {
		err = s.backend.Lease(r.Context(), r.PathValue("name"), o)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// downStale serves DELETE /v1/projects?stale=true: every project whose
// client is gone is taken down now.
func (s *Server) downStale(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("stale") != "true" {
		writeError(w, fmt.Errorf("%w: DELETE /v1/projects takes down the stale projects alone: ?stale=true", errdefs.ErrInvalid))
		return
	}
	out, err := s.backend.DownStale(r.Context())
	if out == nil {
		writeError(w, err)
		return
	}
	for _, c := range out {
		c.Applied, c.Removed = emptyIfNil(c.Applied), emptyIfNil(c.Removed)
	}
	respond(w, out, err)
}
