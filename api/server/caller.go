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
// further and by the supervisor, told who asks by CallerOf, as it acts;
// its networks and its share of ports the supervisor decides against its
// state (its lanes); what its specs may say is the spec policy's
// (peerusers.go). The socket's own admission is PeerPolicy.

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

type callerKey struct{}

// withCaller puts the request's caller in its context.
func (s *Server) withCaller(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, s.callerOf(r)))
}

// CallerOf is who asks, for a backend served by this server: the peer's
// uid, and whether it is confined to its own lane. ok is false outside a
// request of the server's (an in-process call).
func CallerOf(ctx context.Context) (uid uint32, confined bool, ok bool) {
	c, ok := ctx.Value(callerKey{}).(authz.Caller)
	return c.UID, c.Confined, ok
}
