// Package contracttest is a service registry that follows the Service
// Registry Contract (R1–R4, R7) to the letter and knows nothing beyond it,
// for tests of the clients that must speak to any such registry: it reads
// the fields the contract names and ignores every other, answers 400 to a
// register without name, address and port, 410 to a heartbeat naming no
// live id (a batch's "ids" is no id), 404 to a deregister of an unknown
// id, and announces no extension.
package contracttest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// DefaultTTL is the lease of an instance without its own (R3).
const DefaultTTL = 90 * time.Second

// Registry is the strict registry. Its handler is safe for concurrent use.
type Registry struct {
	key string

	// mu guards instances and down; cmu guards requests and statuses,
	// and is taken while mu is held (an answer counts itself), never the
	// other way.
	mu        sync.Mutex
	instances map[string]lease
	down      bool

	cmu      sync.Mutex
	requests map[string]int         // route ("register", "heartbeat", ...) → requests
	statuses map[string]map[int]int // route → status → answers
}

type lease struct {
	in      registryclient.Instance
	expires time.Time
}

// New returns a registry that takes key as its X-API-Key.
func New(key string) *Registry {
	return &Registry{key: key, instances: map[string]lease{}, requests: map[string]int{}, statuses: map[string]map[int]int{}}
}

// Serve runs a new registry on a loopback listener until the test ends and
// returns it and its URL.
func Serve(t testing.TB, key string) (*Registry, string) {
	t.Helper()
	r := New(key)
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return r, srv.URL
}

// ServeOn runs a new registry on l until the test ends.
func ServeOn(t testing.TB, key string, l net.Listener) *Registry {
	t.Helper()
	r := New(key)
	srv := httptest.NewUnstartedServer(r)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return r
}

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	route := strings.TrimPrefix(req.URL.Path, "/api/v1/services")
	route = strings.TrimPrefix(route, "/")
	if route == "" {
		route = "list"
	}
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down {
		// Unreachable: the connection ends without an answer.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		r.answer(w, route, http.StatusServiceUnavailable, map[string]string{"error": "down"})
		return
	}
	if req.Header.Get("X-API-Key") != r.key {
		r.answer(w, route, http.StatusUnauthorized, map[string]string{"error": "invalid API key"})
		return
	}
	var body struct {
		registryclient.Instance
	}
	if req.Method == http.MethodPost {
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			r.answer(w, route, http.StatusBadRequest, map[string]string{"error": "malformed body: " + err.Error()})
			return
		}
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reap(now)
	in := body.Instance
	switch {
	case req.Method == http.MethodPost && route == "register":
		if strings.TrimSpace(in.Name) == "" || strings.TrimSpace(in.Address) == "" || in.Port == 0 {
			r.answer(w, route, http.StatusBadRequest, map[string]string{"error": "name, address and port are required"})
			return
		}
		if in.ID == "" {
			in.ID = in.Name + "-" + in.Address + "-" + strconv.Itoa(in.Port)
		}
		old, existed := r.instances[in.ID]
		in.RegisteredAt, in.UpdatedAt = now, now
		if existed {
			in.RegisteredAt = old.in.RegisteredAt
		}
		r.instances[in.ID] = lease{in: in, expires: now.Add(ttl(in))}
		r.answer(w, route, http.StatusOK, map[string]any{"id": in.ID, "created": !existed})
	case req.Method == http.MethodPost && route == "heartbeat":
		l, ok := r.instances[in.ID]
		if !ok {
			r.answer(w, route, http.StatusGone, map[string]string{"error": fmt.Sprintf("instance %q unknown or expired", in.ID)})
			return
		}
		l.in.UpdatedAt, l.expires = now, now.Add(ttl(l.in))
		r.instances[in.ID] = l
		r.answer(w, route, http.StatusOK, map[string]any{"id": in.ID, "updated_at": now})
	case req.Method == http.MethodPost && route == "deregister":
		if _, ok := r.instances[in.ID]; !ok {
			r.answer(w, route, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("instance %q not registered", in.ID)})
			return
		}
		delete(r.instances, in.ID)
		r.answer(w, route, http.StatusOK, map[string]string{"id": in.ID})
	case req.Method == http.MethodGet && route == "list":
		ins := r.list()
		if req.URL.Query().Get("detail") != "" {
			r.answer(w, route, http.StatusOK, map[string]any{"instances": ins})
			return
		}
		names := []string{}
		for _, in := range ins {
			names = append(names, in.Name)
		}
		slices.Sort(names)
		r.answer(w, route, http.StatusOK, map[string]any{"services": slices.Compact(names)})
	default:
		r.answer(w, route, http.StatusNotFound, map[string]string{"error": "no route"})
	}
}

func ttl(in registryclient.Instance) time.Duration {
	if in.TTL <= 0 {
		return DefaultTTL
	}
	return time.Duration(in.TTL)
}

// answer writes the JSON answer and counts it.
func (r *Registry) answer(w http.ResponseWriter, route string, status int, v any) {
	r.count(route, status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (r *Registry) count(route string, status int) {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.requests[route]++
	if r.statuses[route] == nil {
		r.statuses[route] = map[int]int{}
	}
	r.statuses[route][status]++
}

// reap removes the expired instances. Called with r.mu held.
func (r *Registry) reap(now time.Time) {
	for id, l := range r.instances {
		if now.After(l.expires) {
			delete(r.instances, id)
		}
	}
}

// list is the live instances by id. Called with r.mu held.
func (r *Registry) list() []registryclient.Instance {
	out := make([]registryclient.Instance, 0, len(r.instances))
	for _, l := range r.instances {
		out = append(out, l.in)
	}
	slices.SortFunc(out, func(a, b registryclient.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Instances returns the live instances, by id.
func (r *Registry) Instances() map[string]registryclient.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reap(time.Now())
	out := map[string]registryclient.Instance{}
	for _, in := range r.list() {
		out[in.ID] = in
	}
	return out
}

// Requests is how many requests a route ("register", "heartbeat",
// "deregister", "list") had.
func (r *Registry) Requests(route string) int {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return r.requests[route]
}

// Answers is how many answers of status a route gave.
func (r *Registry) Answers(route string, status int) int {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	return r.statuses[route][status]
}

// SetDown makes the registry unreachable (every connection is closed
// without an answer), or reachable again with what it held.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// Wipe forgets every instance, as a registry restarted without state.
func (r *Registry) Wipe() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.instances)
}
