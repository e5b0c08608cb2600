package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Server serves a Backend over HTTP. Access control is a Peer check run on
// every request with the credentials of the connection's peer.
type Server struct {
	backend Backend
	allow   func(Peer) bool
	log     *zap.Logger
	// streams counts every open stream, root's too, for the status.
	streams                    atomic.Int64
	streamQuota, applyQuota    *quota
	rootApplying, peerApplying chan struct{}
	// specPolicy, when set, may refuse what a peer applies.
	specPolicy func(Peer, *spec.Workload) error
	// shares are what a confined caller holds at most (share.go);
	// holding its changes checked against them, one at a time.
	shares  Shares
	holding holding
	mux     *http.ServeMux
	handler http.Handler
}

// Option adds to a Server.
type Option func(*Server)

// WithSpecPolicy has every spec a peer applies checked by check first: an
// error refuses the apply (forbidden, naming the field), nothing of it done.
func WithSpecPolicy(check func(Peer, *spec.Workload) error) Option {
	return func(s *Server) { s.specPolicy = check }
}

// checkDocument refuses the request's caller op on a document of kind
// other than a workload before it is read further: authz's decision,
// which refuses a confined caller every change of one.
func (s *Server) checkDocument(r *http.Request, op authz.Op, kind, name string) error {
	return authz.Decide(s.callerOf(r), op, authz.Doc{Kind: kind, Name: name})
}

// checkSpec runs the spec policy for the request's peer.
func (s *Server) checkSpec(r *http.Request, w *spec.Workload) error {
	if s.specPolicy == nil {
		return nil
	}
	p, _ := peerFrom(r.Context())
	err := s.specPolicy(p, w)
	var ae *api.Error
	if errors.As(err, &ae) {
		named := *ae
		named.Message = "workload " + w.Name + ": " + ae.Message
		return &named
	}
	return err
}

// WithRoute serves h on pattern too, behind the same peer check.
func WithRoute(pattern string, h http.Handler) Option {
	return func(s *Server) { s.mux.Handle(pattern, h) }
}

// WithRootRoute serves h on pattern to root's equals alone: a confined
// caller is refused (forbidden). For what shows the whole daemon (its
// metrics, its profiles) or holds what one caller at a time may hold
// (the CPU profiler).
func WithRootRoute(pattern string, h http.Handler) Option {
	return func(s *Server) {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if c := s.callerOf(r); c.Confined {
				writeError(w, fmt.Errorf("%w: %s is root's: it shows the whole daemon, and a caller other than root (uid %d) sees its own lane alone", errdefs.ErrForbidden, r.URL.Path, c.UID))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// WithMiddleware wraps the routing (after the peer check): mw sees each
// request once its route is known (r.Pattern).
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *Server) { s.handler = mw(s.handler) }
}

// New returns a server for b. allow decides which peers are served;
// everyone else gets 403 and nothing else.
func New(b Backend, allow func(Peer) bool, log *zap.Logger, opts ...Option) *Server {
	s := &Server{backend: b, allow: allow, log: log, mux: http.NewServeMux(),
		rootApplying: make(chan struct{}, maxApplies), peerApplying: make(chan struct{}, maxApplies),
		applyQuota:  newQuota("applies in progress", maxApplies, maxAppliesPerUser),
		streamQuota: newQuota("streams", MaxStreams, maxStreamsPerUser), shares: DefaultShares}
	s.routes()
	s.handler = s.mux
	for _, o := range opts {
		o(s)
	}
	return s
}

// HTTPServer wraps s in an http.Server that records each connection's peer
// (from the gate Serve puts in front of the listener) and drops idle and
// slow connections. There is no overall write timeout: an apply may wait
// minutes for a build, and streams last as long as their reader reads;
// every write has its own deadline instead.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ConnContext:       withPeer,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /v1/status", s.status)
	m.HandleFunc("GET /v1/workloads", s.list)
	m.HandleFunc("GET /v1/workloads/{name}", s.get)
	m.HandleFunc("PUT /v1/workloads/{name}", s.put)
	m.HandleFunc("DELETE /v1/workloads/{name}", s.delete)
	m.HandleFunc("POST /v1/workloads/{name}/start", s.lifecycle(Backend.Start))
	m.HandleFunc("POST /v1/workloads/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		op := Backend.Stop
		if r.URL.Query().Get("force") == "true" {
			op = Backend.Kill
		}
		s.lifecycle(op)(w, r)
	})
	m.HandleFunc("POST /v1/workloads/{name}/restart", s.lifecycle(Backend.Restart))
	m.HandleFunc("POST /v1/workloads/{name}/signal", s.signal)
	m.HandleFunc("POST /v1/workloads/{name}/scale", s.scale)
	m.HandleFunc("GET /v1/workloads/{name}/logs", s.logs)
	m.HandleFunc("GET /v1/events", s.events)
	m.HandleFunc("POST /v1/batch/apply", s.applyBatch)
	m.HandleFunc("PUT /v1/projects/{name}", s.up)
	m.HandleFunc("DELETE /v1/projects/{name}", s.down)
	m.HandleFunc("POST /v1/projects/{name}/hold", s.hold)
	m.HandleFunc("PUT /v1/projects/{name}/lease", s.lease)
	m.HandleFunc("GET /v1/leases", func(w http.ResponseWriter, r *http.Request) {
		ls, err := s.backend.Leases(r.Context())
		respond(w, ls, err)
	})
	m.HandleFunc("DELETE /v1/projects", s.downStale)
	m.HandleFunc("POST /v1/batch/{action}", s.runBatch)
	m.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.backend.Stats(r.Context())
		if err == nil {
			var mine func(string) bool
			if mine, err = s.lane(r); err == nil && mine != nil {
				st.Workloads = slices.DeleteFunc(st.Workloads, func(u api.Usage) bool { return !mine(u.Workload) })
			}
		}
		respond(w, st, err)
	})
	m.HandleFunc("GET /v1/ports", func(w http.ResponseWriter, r *http.Request) {
		ps, err := s.backend.Ports(r.Context())
		if err == nil {
			var mine func(string) bool
			if mine, err = s.lane(r); err == nil && mine != nil {
				ps = slices.DeleteFunc(ps, func(pm api.PortMapping) bool { return !mine(pm.Workload) })
			}
		}
		respond(w, emptyIfNil(ps), err)
	})
	for _, k := range spec.DocKinds() {
		s.documents(m, k)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no route %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
	})
}

// documents serves a kind of document beside workloads at /v1/PLURAL: GET
// lists them with what they do, PUT /v1/PLURAL/NAME records one (its name
// must be NAME) and DELETE /v1/PLURAL/NAME removes one; both are root's
// under a spec policy (checkDocument).
func (s *Server) documents(m *http.ServeMux, k spec.DocKind) {
	path := "/v1/" + k.Plural
	m.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		vs, err := s.backend.Documents(r.Context(), k.Name)
		if err == nil {
			vs, err = s.ownDocuments(r, vs)
		}
		if err == nil && vs == nil {
			vs = []struct{}{}
		}
		respond(w, vs, err)
	})
	m.HandleFunc("PUT "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		d, err := spec.DecodeDocumentJSON(k.Name, r.Body)
		if err == nil && d.DocName() != r.PathValue("name") {
			err = &spec.FieldError{Field: "name", Msg: fmt.Sprintf("%q does not match the path's %q", d.DocName(), r.PathValue("name"))}
		}
		if err != nil {
			writeError(w, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err))
			return
		}
		if err := s.checkDocument(r, authz.Apply, k.Name, d.DocName()); err != nil {
			writeError(w, err)
			return
		}
		v, err := s.backend.PutDocument(r.Context(), d)
		respond(w, v, err)
	})
	m.HandleFunc("DELETE "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkDocument(r, authz.Remove, k.Name, r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		if err := s.backend.DeleteDocument(r.Context(), k.Name, r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// ownDocuments is what a confined caller reads of a kind's list: the
// networks that hold a workload of its own, each with its own workloads
// and published ports alone; the workspace documents of its own
// workspace (uid-N, in whatever project); no policy, nor a document of
// another kind (root's, naming root's workloads). Another caller reads
// them all.
func (s *Server) ownDocuments(r *http.Request, vs any) (any, error) {
	c := s.callerOf(r)
	if !c.Confined {
		return vs, nil
	}
	switch vs := vs.(type) {
	case []api.Network:
		mine, err := s.lane(r)
		if err != nil {
			return nil, err
		}
		out := []api.Network{}
		for _, n := range vs {
			n.Workloads = slices.DeleteFunc(slices.Clone(n.Workloads), func(w string) bool { return !mine(w) })
			n.Published = slices.DeleteFunc(slices.Clone(n.Published), func(p api.Published) bool { return !mine(p.Workload) })
			if len(n.Workloads) > 0 {
				out = append(out, n)
			}
		}
		return out, nil
	case []spec.Workspace:
		own := spec.PeerWorkspace(c.UID)
		return slices.DeleteFunc(slices.Clone(vs), func(ws spec.Workspace) bool { return spec.BareName(ws.Name) != own }), nil
	}
	return []struct{}{}, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := peerFrom(r.Context())
	if !ok || !s.allow(p) {
		writeError(w, fmt.Errorf("%w: uid %d may not use this socket", errdefs.ErrForbidden, p.UID))
		return
	}
	// A body over the caller's bound is refused by its length before a
	// byte of it is read, and one that does not say its length where it
	// passes the bound.
	limit, share := s.bodyLimit(r)
	if r.ContentLength > limit {
		if share {
			writeError(w, &bodyShareError{uid: p.UID, limit: limit, size: r.ContentLength})
		} else {
			writeError(w, &http.MaxBytesError{Limit: limit})
		}
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if share {
		r.Body = shareBody{ReadCloser: r.Body, uid: p.UID, limit: limit}
	}
	if r.ContentLength != 0 {
		// A body trickled in byte by byte must not hold the connection:
		// the whole of it has bodyTimeout, and then the deadline goes,
		// so that what the answer waits for (a build) has no limit.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		r.Body = &deadlineBody{ReadCloser: r.Body, done: func() { _ = rc.SetReadDeadline(time.Time{}) }}
	}
	s.handler.ServeHTTP(w, s.withCaller(r))
}

// deadlineBody calls done once the body has been read to its end, or
// closed. Not on a failed read: the server then drains what is left of
// the body, and that must still meet the deadline.
type deadlineBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close() // drains the rest, under the deadline
	b.once.Do(b.done)
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// openStream counts a stream in, or refuses it past the streams' quota; a
// true answer must be followed by closeStream.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) bool {
	p, _ := peerFrom(r.Context())
	if err := s.streamQuota.take(p.UID); err != nil {
		writeError(w, err)
		return false
	}
	s.streams.Add(1)
	return true
}

func (s *Server) closeStream(r *http.Request) {
	p, _ := peerFrom(r.Context())
	s.streams.Add(-1)
	s.streamQuota.give(p.UID)
}

// admitApply waits for one of the places for an apply, root's or the
// other peers', or for the request to end; a peer other than root holds at
// most maxAppliesPerUser of them (more are refused). A true answer must be
// followed by doneApply.
func (s *Server) admitApply(w http.ResponseWriter, r *http.Request) bool {
	p, _ := peerFrom(r.Context())
	if err := s.applyQuota.take(p.UID); err != nil {
		writeError(w, err)
		return false
	}
	slots := s.peerApplying
	if p.UID == 0 {
		slots = s.rootApplying
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-r.Context().Done():
		s.applyQuota.give(p.UID)
		writeError(w, r.Context().Err())
		return false
	}
}

func (s *Server) doneApply(r *http.Request) {
	p, _ := peerFrom(r.Context())
	if p.UID == 0 {
		<-s.rootApplying
	} else {
		<-s.peerApplying
	}
	s.applyQuota.give(p.UID)
}

// respond writes v, or err when there is one.
func respond(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// emptyIfNil makes an empty list encode as [] rather than null.
func emptyIfNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.backend.Status(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	st.Streams = s.streams.Load()
	if c := s.callerOf(r); c.Confined {
		// A confined caller's counts are of its own lane; the workloads
		// directory's files and the quarantined records are root's, and
		// the registry's last error may name another's instance.
		ws, err := s.backend.List(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		st.Workloads, st.States = 0, map[api.State]int{}
		for _, wl := range ws {
			if authz.Decide(c, authz.Read, workloadDoc(wl.Name, wl)) == nil {
				st.Workloads++
				st.States[wl.State]++
			}
		}
		st.FileProblems, st.Quarantined, st.Registry.LastError = nil, nil, ""
	}
	writeJSON(w, http.StatusOK, st)
}

// lane is what a confined caller may read of the workloads, by name, for
// an answer that lists them beside what else (ports, usage); nil for a
// caller who reads them all.
func (s *Server) lane(r *http.Request) (func(name string) bool, error) {
	c := s.callerOf(r)
	if !c.Confined {
		return nil, nil
	}
	ws, err := s.backend.List(r.Context())
	if err != nil {
		return nil, err
	}
	mine := make(map[string]bool, len(ws))
	for _, wl := range ws {
		mine[wl.Name] = authz.Decide(c, authz.Read, workloadDoc(wl.Name, wl)) == nil
	}
	return func(name string) bool { return mine[name] }, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	ws, err := s.backend.List(r.Context())
	if q := r.URL.Query(); q.Has("project") {
		ws = slices.DeleteFunc(ws, func(wl api.Workload) bool { return spec.ProjectOf(wl.Name) != q.Get("project") })
	}
	// A confined caller sees its own lane: the workloads it applied, in
	// whatever project.
	c := s.callerOf(r)
	ws = slices.DeleteFunc(ws, func(wl api.Workload) bool { return authz.Decide(c, authz.Read, workloadDoc(wl.Name, wl)) != nil })
	respond(w, emptyIfNil(ws), err)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	wl, err := s.backend.Get(r.Context(), r.PathValue("name"))
	if err == nil {
		// A confined caller reads its own lane alone, as list shows it.
		err = authz.Decide(s.callerOf(r), authz.Read, workloadDoc(wl.Name, *wl))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}

func (s *Server) put(w http.ResponseWriter, r *http.Request) {
	if !s.admitApply(w, r) {
		return
	}
	defer s.doneApply(r)
	name := r.PathValue("name")
	ws, err := spec.DecodeJSON(r.Body)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err))
		return
	}
	if ws.Name != name {
		writeError(w, &spec.FieldError{Field: "name", Msg: fmt.Sprintf("%q does not match the path's %q", ws.Name, name)})
		return
	}
	if err := s.checkSpec(r, ws); err != nil {
		writeError(w, err)
		return
	}
	incoming := []*spec.Workload{ws}
	release, err := s.holdShare(r, incoming, replacing(incoming))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	q := r.URL.Query()
	wl, err := s.backend.Apply(r.Context(), ws, api.ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if err := s.backend.Remove(r.Context(), r.PathValue("name"), api.RemoveOptions{Force: r.URL.Query().Get("force") == "true"}); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) lifecycle(op func(Backend, context.Context, string) (*api.Workload, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wl, err := op(s.backend, r.Context(), r.PathValue("name"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, wl)
	}
}

func (s *Server) scale(w http.ResponseWriter, r *http.Request) {
	if !s.admitApply(w, r) {
		return
	}
	defer s.doneApply(r)
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("replicas"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: replicas: %q is not a number", errdefs.ErrInvalid, q.Get("replicas")))
		return
	}
	release, err := s.scaleShare(r, r.PathValue("name"), n)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	wl, err := s.backend.Scale(r.Context(), r.PathValue("name"), n, api.ApplyOptions{Start: q.Get("start") != "false", Force: q.Get("force") == "true"})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	sig, err := spec.ParseSignal(r.URL.Query().Get("sig"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: sig: %v", errdefs.ErrInvalid, err))
		return
	}
	if err := s.backend.Signal(r.Context(), r.PathValue("name"), sig); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// flushWriter flushes after every write so a stream reaches the client as it
// happens.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	_ = f.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

func (f flushWriter) Flush() { _ = f.rc.Flush() }

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if !s.openStream(w, r) {
		return
	}
	defer s.closeStream(r)
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, fmt.Errorf("%w: after: not an event number", errdefs.ErrInvalid))
			return
		}
		after = n
	}
	// ?project=P: the events of one project alone ("" the default
	// project's), for a reader that waits on it.
	project, oneProject := r.URL.Query().Get("project"), r.URL.Query().Has("project")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // unsubscribes a reader dropped for not reading
	ch, err := s.backend.Events(ctx, after)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fw := flushWriter{w: w, rc: http.NewResponseController(w)}
	fw.Flush()
	enc := json.NewEncoder(fw)
	for ev := range ch {
		if oneProject && ev.Project != project {
			continue
		}
		if enc.Encode(ev) != nil {
			return
		}
	}
}

// Serve serves on l until ctx is done, then shuts down: streams are cut,
// requests in flight get a moment to finish.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := s.HTTPServer()
	hs.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(newGate(l, s.allow, s.log)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	return err
}
