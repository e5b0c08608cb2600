package api

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/flyd-dev/flyd/errdefs"
)

// Who may act on what, decided here for the whole API. Without a spec
// policy (--peer-users) every caller the socket admits is root's equal.
// With one, a caller other than root is confined to its own lane: it acts
// only on the workloads it applied (replace, remove, start, stop, signal,
// read the log), and the supervisor holds it to its networks and its
// share of ports (ApplyOptions.Confined); what its specs may say is the
// spec policy's (peerusers.go). The socket's own admission is PeerPolicy.

// caller is who asks: the peer's uid, and whether it is confined.
type caller struct {
	uid      uint32
	confined bool
}

func (s *Server) callerOf(r *http.Request) caller {
	p, _ := peerFrom(r.Context())
	return caller{uid: p.UID, confined: s.specPolicy != nil && p.UID != 0}
}

// applyOptions are o as the caller of r applies: by it, confined or not.
func (s *Server) applyOptions(r *http.Request, o ApplyOptions) ApplyOptions {
	c := s.callerOf(r)
	o.By, o.Confined = c.uid, c.confined
	return o
}

func (s *Server) removeOptions(r *http.Request, o RemoveOptions) RemoveOptions {
	c := s.callerOf(r)
	o.By, o.Confined = c.uid, c.confined
	return o
}

// mayActOn refuses a confined caller a workload another applied. A name
// the daemon does not know passes: the operation answers not_found.
func (s *Server) mayActOn(r *http.Request, name string) error {
	c := s.callerOf(r)
	if !c.confined {
		return nil
	}
	wl, err := s.backend.Get(r.Context(), name)
	if err != nil || wl.AppliedBy == c.uid {
		return nil
	}
	return othersWorkload(name, wl.AppliedBy)
}

func othersWorkload(name string, by uint32) error {
	return fmt.Errorf("%w: workload %s was applied by uid %d: a caller other than root acts only on the workloads it applied", errdefs.ErrForbidden, name, by)
}

// ownBatch is bt as a confined caller may run it: `all` is all of its
// own workloads, and a name of another's refuses the batch.
func (s *Server) ownBatch(r *http.Request, bt Batch) (Batch, error) {
	c := s.callerOf(r)
	if !c.confined {
		return bt, nil
	}
	ws, err := s.backend.List(r.Context())
	if err != nil {
		return bt, err
	}
	if bt.All && len(bt.Names) == 0 {
		bt.All, bt.Names = false, []string{}
		for _, w := range ws {
			if w.AppliedBy == c.uid {
				bt.Names = append(bt.Names, w.Name)
			}
		}
		return bt, nil
	}
	for _, n := range bt.Names {
		if i := slices.IndexFunc(ws, func(w Workload) bool { return w.Name == n }); i >= 0 && ws[i].AppliedBy != c.uid {
			return bt, othersWorkload(n, ws[i].AppliedBy)
		}
	}
	return bt, nil
}
