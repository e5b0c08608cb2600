package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// Shares are what one caller other than root holds at most of the host
// under --peer-users, beside its connections, streams and applies
// (quota.go). They are counted from what it holds when it asks, so that a
// workload removed gives its share back, and root is never counted.
type Shares struct {
	// Workloads bounds the workloads one peer holds, each replica of a
	// group one (--peer-max-workloads).
	Workloads int
	// SpecBytes bounds the JSON of its workloads' specs as `flyd inspect`
	// shows them, a group's once for each replica
	// (--peer-max-spec-bytes).
	SpecBytes int64
	// Body bounds a request body of its, a project's too
	// (--peer-max-body); a longer one is refused before it is read.
	Body int64
	// LogBytes bounds its workloads' logs on disk in all
	// (--peer-max-log-bytes): each of its workloads' log, rotated files
	// included, holds at most LogBytes / Workloads (WorkloadLogBytes).
	LogBytes int64
}

// DefaultShares are the shares of a daemon whose flags say none.
var DefaultShares = Shares{Workloads: 64, SpecBytes: 4 << 20, Body: 1 << 20, LogBytes: 512 << 20}

// WorkloadLogBytes is the most one workload of a peer's keeps of its log
// on disk: its share of the peer's LogBytes.
func (sh Shares) WorkloadLogBytes() int64 {
	if sh.Workloads <= 0 {
		return sh.LogBytes
	}
	return sh.LogBytes / int64(sh.Workloads)
}

// Check says what of sh cannot be, naming the flag.
func (sh Shares) Check() error {
	switch {
	case sh.Workloads < 1:
		return fmt.Errorf("--peer-max-workloads must be at least 1")
	case sh.SpecBytes < 1:
		return fmt.Errorf("--peer-max-spec-bytes must be at least 1")
	case sh.Body < 1:
		return fmt.Errorf("--peer-max-body must be at least 1")
	case sh.LogBytes < 1:
		return fmt.Errorf("--peer-max-log-bytes must be at least 1")
	}
	return nil
}

// WithShares sets the peers' shares (DefaultShares otherwise). They hold
// only under a spec policy (--peer-users), which confines callers.
func WithShares(sh Shares) Option {
	return func(s *Server) { s.shares = sh }
}

// bodyLimit is the most of a request body the caller of r may send: a
// project's more than another's, and a confined caller's share at most.
func (s *Server) bodyLimit(r *http.Request) (int64, bool) {
	limit := int64(api.MaxBodyBytes)
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/projects/") {
		limit = api.MaxProjectBytes
	}
	if s.callerOf(r).Confined && s.shares.Body < limit {
		return s.shares.Body, true
	}
	return limit, false
}

// bodyShareError is a confined caller's body over its share.
type bodyShareError struct {
	uid         uint32
	limit, size int64 // size -1: unknown, it was being read
	err         error // the reader's, when it was read
}

func (e *bodyShareError) Error() string {
	at := "longer"
	if e.size >= 0 {
		at = fmt.Sprintf("%d bytes", e.size)
	}
	return fmt.Sprintf("a request body of uid %d is at most %d bytes, its share (--peer-max-body); this one is %s", e.uid, e.limit, at)
}

func (e *bodyShareError) Unwrap() error { return e.err }

func (e *bodyShareError) apiError() *api.Error {
	return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: e.Error()}
}

// shareBody is a confined caller's body, bounded by its share: a read
// past it fails with bodyShareError.
type shareBody struct {
	io.ReadCloser
	uid   uint32
	limit int64
}

func (b shareBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = &bodyShareError{uid: b.uid, limit: b.limit, size: -1, err: err}
	}
	return n, err
}

// holding is the share check in progress of each confined caller, one at
// a time: two changes of one caller never both count what it held before
// either.
type holding struct {
	mu  sync.Mutex
	uid map[uint32]chan struct{}
}

func (h *holding) slot(uid uint32) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.uid == nil {
		h.uid = map[uint32]chan struct{}{}
	}
	c := h.uid[uid]
	if c == nil {
		c = make(chan struct{}, 1)
		h.uid[uid] = c
	}
	return c
}

// holdShare refuses a confined caller a change that would take it past
// its share of workloads or spec bytes: what it holds, but what the
// change replaces (replaced), and what incoming adds. A nil error comes
// with release, to call once the change is made (or failed): until then
// the caller's next change waits, and counts what this one made.
func (s *Server) holdShare(r *http.Request, incoming []*spec.Workload, replaced func(api.Workload) bool) (release func(), err error) {
	c := s.callerOf(r)
	if !c.Confined {
		return func() {}, nil
	}
	slot := s.holding.slot(c.UID)
	select {
	case slot <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	release = func() { <-slot }
	ws, err := s.backend.List(r.Context())
	if err != nil {
		release()
		return nil, err
	}
	n, size := 0, int64(0)
	for _, wl := range ws {
		if wl.AppliedBy != c.UID || replaced(wl) {
			continue
		}
		n++
		// The list leaves specs out: each is asked for, of at most
		// a share of workloads.
		if one, err := s.backend.Get(r.Context(), wl.Name); err == nil {
			size += specBytes(one.Spec)
		}
	}
	for _, sp := range incoming {
		k := max(sp.Replicas, 1)
		n += k
		size += int64(k) * specBytes(sp.Redacted())
	}
	switch {
	case n > s.shares.Workloads:
		err = fmt.Errorf("%w: uid %d would hold %d workloads: a caller other than root holds at most %d, its share (--peer-max-workloads)", errdefs.ErrForbidden, c.UID, n, s.shares.Workloads)
	case size > s.shares.SpecBytes:
		err = fmt.Errorf("%w: the specs of uid %d's workloads would hold %d bytes: a caller other than root holds at most %d, its share (--peer-max-spec-bytes)", errdefs.ErrForbidden, c.UID, size, s.shares.SpecBytes)
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// overShare refuses at once a confined caller's change that alone is
// more workloads than its share, before its specs are looked at.
func (s *Server) overShare(r *http.Request, incoming []*spec.Workload) error {
	c := s.callerOf(r)
	if !c.Confined {
		return nil
	}
	n := 0
	for _, sp := range incoming {
		n += max(sp.Replicas, 1)
	}
	if n > s.shares.Workloads {
		return fmt.Errorf("%w: this change is %d workloads: a caller other than root (uid %d) holds at most %d, its share (--peer-max-workloads)", errdefs.ErrForbidden, n, c.UID, s.shares.Workloads)
	}
	return nil
}

// scaleShare judges a confined caller's scale of name to n replicas
// before the backend is asked: a workload or group of another's is
// refused as authz refuses it, naming who applied it and nothing of its
// spec, and the group's n replicas count in the caller's share in place
// of those it has.
func (s *Server) scaleShare(r *http.Request, name string, n int) (func(), error) {
	c := s.callerOf(r)
	if !c.Confined {
		return func() {}, nil
	}
	ws, err := s.backend.List(r.Context())
	if err != nil {
		return nil, err
	}
	var group *spec.Workload
	for _, wl := range ws {
		if wl.Name != name && wl.Group != name {
			continue
		}
		if err := authz.Decide(c, authz.Apply, workloadDoc(wl.Name, wl)); err != nil {
			return nil, err
		}
		if group != nil {
			continue
		}
		if one, err := s.backend.Get(r.Context(), wl.Name); err == nil && one.Spec != nil {
			g := *one.Spec
			g.Name, g.ReplicaOf, g.Replicas = name, "", max(n, 1)
			group = &g
		}
	}
	var incoming []*spec.Workload
	if group != nil {
		incoming = append(incoming, group)
	}
	return s.holdShare(r, incoming, func(wl api.Workload) bool { return wl.Name == name || wl.Group == name })
}

// specBytes is the length of sp's JSON, as the API shows it.
func specBytes(sp *spec.Workload) int64 {
	if sp == nil {
		return 0
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// fullName is the name sp is applied under: its project's.
func fullName(sp *spec.Workload) string {
	if sp.Project == "" || strings.Contains(sp.Name, spec.ProjectSep) {
		return sp.Name
	}
	return spec.FullName(sp.Project, sp.Name)
}

// replacing says which held workloads specs replace: a workload of one's
// name, and the replicas of a group of it.
func replacing(specs []*spec.Workload) func(api.Workload) bool {
	names := map[string]bool{}
	for _, sp := range specs {
		names[fullName(sp)] = true
	}
	return func(wl api.Workload) bool { return names[wl.Name] || wl.Group != "" && names[wl.Group] }
}

// replacingProject says which held workloads an up of project with
// keep replaces: every one of the project but those it keeps.
func replacingProject(project string, keep []string) func(api.Workload) bool {
	return func(wl api.Workload) bool {
		if spec.ProjectOf(wl.Name) != project {
			return false
		}
		bare := spec.BareName(wl.Name)
		return !slices.ContainsFunc(keep, func(k string) bool {
			return k == wl.Name || k == bare || wl.Group != "" && (k == wl.Group || k == spec.BareName(wl.Group))
		})
	}
}
