package server

import (
	"context"
	"net/http"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
)

// Who the caller is, decided here for the whole API: without a spec
// policy (--peer-users) every caller the socket admits is root's equal;
// with one, a caller other than root is confined to its own lane. What a
// caller may do to a document (the workloads it applied; no network or
// policy document) is authz's decision, asked here before a request goes
// further and by those below, told who asks by the request's context
// (authz.CallerOf), as they act; its networks and its share of ports the
// supervisor decides against its state (its lanes); what its specs may
// say is the spec policy's (peerusers.go). The socket's own admission is
// PeerPolicy.

// callerOf is who asks, as authz judges callers: the peer's uid, and
// whether it is confined.
func (s *Server) callerOf(r *http.Request) authz.Caller {
	p, _ := peerFrom(r.Context())
	return authz.Caller{UID: p.UID, Confined: s.specPolicy != nil && p.UID != 0}
}

// workloadDoc is a workload the backend answered, as authz judges it,
// under the name the caller gave it.
func workloadDoc(name string, wl api.Workload) authz.Doc {
	return authz.Doc{Name: name, Exists: true, AppliedBy: wl.AppliedBy, Owner: wl.Owner}
}

// withCaller puts the request's caller in its context, where the backend
// and the supervisor find it (authz.CallerOf), and the server, where a
// route given to it (ReachHandler) finds the caller's lane.
func (s *Server) withCaller(r *http.Request) *http.Request {
	ctx := authz.WithCaller(r.Context(), s.callerOf(r))
	return r.WithContext(context.WithValue(ctx, serverKey{}, s))
}

// serverKey is where withCaller puts the server.
type serverKey struct{}

// serverOf is the server that serves r, nil for a request it did not
// admit.
func serverOf(r *http.Request) *Server {
	s, _ := r.Context().Value(serverKey{}).(*Server)
	return s
}
