package server

import (
	"context"
	"net/http"

	"github.com/flyd-dev/flyd/api"
)

// ReachSource is what serves GET /v1/reach: a backend that has it
// serves the route (ReachHandler) and the refusal metric.
type ReachSource interface {
	Reach(ctx context.Context, name string) ([]api.ReachEndpoint, error)
}

// ReachHandler serves GET /v1/reach[?name=WORKLOAD].
func ReachHandler(src ReachSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		eps, err := src.Reach(r.Context(), r.URL.Query().Get("name"))
		respond(w, emptyIfNil(eps), err)
	})
}
