package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(stopsEtcd{m}) }

// stopsEtcd stops the shared etcd cluster after the tests and before the
// leak check, which would otherwise see its client's goroutines.
type stopsEtcd struct{ m *testing.M }

func (s stopsEtcd) Run() int {
	code := s.m.Run()
	if shared.c != nil {
		shared.c.Stop()
		os.RemoveAll(shared.dir)
	}
	return code
}

// shared is the 3-member etcd cluster of the tests that do not kill
// members, started by the first that needs it. Each test keeps to a
// prefix of its own.
var shared struct {
	once sync.Once
	c    *etcdtest.Cluster
	dir  string
	err  error
}

func sharedEtcd(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	bin := etcdtest.Binary(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "flyd-etcd-")
		if shared.err == nil {
			shared.c, shared.err = etcdtest.Start(bin, shared.dir, 3, func() int { return testenv.FreePort(t) })
		}
	})
	if shared.err != nil {
		t.Fatalf("starting the shared etcd cluster: %v", shared.err)
	}
	return shared.c
}

var prefixes atomic.Int64

// openEtcd opens an etcd store on endpoints under a prefix no other test
// uses, closed when the test ends.
func openEtcd(t testing.TB, endpoints []string, mod ...func(*EtcdConfig)) *EtcdStore {
	t.Helper()
	cfg := EtcdConfig{Endpoints: endpoints, Prefix: fmt.Sprintf("/flyd-test/%d-%d/", os.Getpid(), prefixes.Add(1))}
	for _, f := range mod {
		f(&cfg)
	}
	st, err := OpenEtcd(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storeKind names a Store the contract checks run against.
type storeKind string

const (
	memory storeKind = "memory"
	etcd   storeKind = "etcd"
)

// eachStore runs f as a subtest per store: one suite, two stores.
func eachStore(t *testing.T, f func(t *testing.T, st storeKind)) {
	for _, st := range []storeKind{memory, etcd} {
		t.Run(string(st), func(t *testing.T) { f(t, st) })
	}
}

const testKey = "k3y-0123456789abcdef"

// t0 is when every test's clock starts.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// clock is the injectable time of a test: leases move only when it does.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// harness is a server driven through its handler, with its own clock:
// the stamps follow it, and with the memory store the leases too.
type harness struct {
	t    *testing.T
	s    *Server
	clk  *clock
	etcd *EtcdStore // nil with the memory store
}

func newHarness(t *testing.T, mod ...func(*Config)) *harness {
	t.Helper()
	return newHarnessOn(t, memory, mod...)
}

func newHarnessOn(t *testing.T, st storeKind, mod ...func(*Config)) *harness {
	t.Helper()
	clk := newClock()
	cfg := Config{DefaultTTL: DefaultTTL, Key: testKey, Now: clk.Now}
	h := &harness{t: t, clk: clk}
	if st == etcd {
		h.etcd = openEtcd(t, sharedEtcd(t).Endpoints())
		cfg.Store = h.etcd
	}
	for _, f := range mod {
		f(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

// lapse makes the lease of id pass: the memory store's clock moves past
// it; etcd's key is deleted, which is what its lease's expiry does (the
// lease itself is shared with other instances).
func (h *harness) lapse(id string) {
	h.t.Helper()
	if h.etcd == nil {
		for _, in := range h.instances("") {
			if in.ID == id {
				h.clk.Add(time.Duration(in.TTL) + time.Nanosecond)
				return
			}
		}
		h.t.Fatalf("lapse: %q is not listed", id)
	}
	ctx := context.Background()
	resp, err := h.etcd.cli.Get(ctx, h.etcd.key(id))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		h.t.Fatalf("lapse: no leased key for %q (%v)", id, err)
	}
	if _, err := h.etcd.cli.Delete(ctx, h.etcd.key(id)); err != nil {
		h.t.Fatal(err)
	}
}

// count is how many instances are listed, healthy or not.
func (h *harness) count() int {
	h.t.Helper()
	return len(h.instances(""))
}

func withDefaultTTL(d time.Duration) func(*Config) {
	return func(c *Config) { c.DefaultTTL = d }
}

// req sends a request with the right key.
func (h *harness) req(method, path, body string) *httptest.ResponseRecorder {
	return h.reqKey(method, path, body, testKey)
}

func (h *harness) reqKey(method, path, body, key string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	w := httptest.NewRecorder()
	h.s.Handler().ServeHTTP(w, r)
	return w
}

// must sends a request and fails the test unless it gets want.
func (h *harness) must(want int, method, path, body string) *httptest.ResponseRecorder {
	h.t.Helper()
	w := h.req(method, path, body)
	if w.Code != want {
		h.t.Fatalf("%s %s %s: HTTP %d %s; want %d", method, path, body, w.Code, w.Body, want)
	}
	return w
}

type registered struct {
	ID      string `json:"id"`
	Created bool   `json:"created"`
}

func (h *harness) register(body string) registered {
	h.t.Helper()
	var r registered
	decodeBody(h.t, h.must(http.StatusOK, http.MethodPost, PathRegister, body), &r)
	return r
}

func (h *harness) heartbeat(id string) int {
	h.t.Helper()
	return h.req(http.MethodPost, PathHeartbeat, `{"id":"`+id+`"}`).Code
}

func (h *harness) instances(query string) []Instance {
	h.t.Helper()
	var out struct {
		Instances []Instance `json:"instances"`
	}
	decodeBody(h.t, h.must(http.StatusOK, http.MethodGet, PathServices+"?detail=1"+query, ""), &out)
	return out.Instances
}

func (h *harness) names(query string) []string {
	h.t.Helper()
	var out struct {
		Services []string `json:"services"`
	}
	decodeBody(h.t, h.must(http.StatusOK, http.MethodGet, PathServices+query, ""), &out)
	return out.Services
}

func (h *harness) ids(query string) []string {
	h.t.Helper()
	ids := []string{}
	for _, in := range h.instances(query) {
		ids = append(ids, in.ID)
	}
	return ids
}

func decodeBody(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q; want application/json (body %s)", ct, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("decoding %s: %v", w.Body, err)
	}
}

// errorMessage is the message of a JSON error answer.
func errorMessage(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var eb errorBody
	decodeBody(t, w, &eb)
	if eb.Error == "" {
		t.Fatalf("error answer without a message: %s", w.Body)
	}
	return eb.Error
}
