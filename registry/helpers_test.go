package registry

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// harness is a server driven through its handler, with its own clock.
type harness struct {
	t   *testing.T
	s   *Server
	clk *clock
}

func newHarness(t *testing.T, mod ...func(*Config)) *harness {
	t.Helper()
	clk := newClock()
	cfg := Config{DefaultTTL: DefaultTTL, Key: testKey, Now: clk.Now}
	for _, f := range mod {
		f(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, s: s, clk: clk}
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
