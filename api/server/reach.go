package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
)

// ReachSource is what serves GET /v1/reach: a backend that has it
// serves the route (ReachHandler) and the refusal metric.
type ReachSource interface {
	Reach(ctx context.Context, name string) ([]api.ReachEndpoint, error)
}

// ReachHandler serves GET /v1/reach[?name=WORKLOAD]. A confined caller
// reads its own lane: the endpoints of its workloads, and of the
// workloads each admits or refused, its own (and flyd's entry); the
// reach of another's workload is refused, naming who applied it.
func ReachHandler(src ReachSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		var mine func(string) bool
		if s := serverOf(r); s != nil {
			var err error
			if mine, err = s.lane(r); err != nil {
				writeError(w, err)
				return
			}
			if mine != nil && name != "" && !mine(name) {
				wl, err := s.backend.Get(r.Context(), name)
				if err == nil {
					err = authz.Decide(s.callerOf(r), authz.Read, workloadDoc(wl.Name, *wl))
				}
				if err != nil {
					writeError(w, err)
					return
				}
			}
		}
		eps, err := src.Reach(r.Context(), name)
		if err == nil && mine != nil {
			eps = slices.DeleteFunc(eps, func(e api.ReachEndpoint) bool { return !mine(e.Workload) })
			for i := range eps {
				e := &eps[i]
				e.Admits = slices.DeleteFunc(e.Admits, func(a api.ReachAdmit) bool { return a.Workload != api.ReachFlyd && !mine(a.Workload) })
				e.Refused = slices.DeleteFunc(e.Refused, func(x api.ReachRefused) bool { return !mine(x.Workload) })
			}
		}
		respond(w, emptyIfNil(eps), err)
	})
}
