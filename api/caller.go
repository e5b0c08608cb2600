package api

import (
	"context"
	"net/http"
)

// Who may act on what, decided here for the whole API. Without a spec
// policy (--peer-users) every caller the socket admits is root's equal.
// With one, a caller other than root is confined to its own lane: it acts
// only on the workloads it applied (replace, remove, start, stop, signal,
// read the log), in its networks, with its share of ports: the supervisor
// decides that, against its state, as it acts (its lanes), told who asks
// by CallerOf; what its specs may say is the spec
// policy's (peerusers.go). The socket's own admission is PeerPolicy.

// caller is who asks: the peer's uid, and whether it is confined.
type caller struct {
	uid      uint32
	confined bool
}

func (s *Server) callerOf(r *http.Request) caller {
	p, _ := peerFrom(r.Context())
	return caller{uid: p.UID, confined: s.specPolicy != nil && p.UID != 0}
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
	c, ok := ctx.Value(callerKey{}).(caller)
	return c.uid, c.confined, ok
}
