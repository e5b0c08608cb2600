package registry

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// every route of R7, and then some the registry does not have: all of them
// are behind the key.
var routes = []struct{ method, path, body string }{
	{http.MethodPost, PathRegister, `{"name":"s","address":"h","port":1}`},
	{http.MethodPost, PathHeartbeat, `{"id":"s-h-1"}`},
	{http.MethodPost, PathDeregister, `{"id":"s-h-1"}`},
	{http.MethodGet, PathServices, ""},
	{http.MethodGet, PathServices + "?detail=1", ""},
	{http.MethodGet, PathExport, ""},
	{http.MethodGet, "/nope", ""},
	{http.MethodDelete, PathServices, ""},
}

// R7: without the key, or with a wrong one, every route answers a JSON 401.
func TestR7Auth(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		keys := []struct {
			name, key string
			status    int
		}{
			{"no key", "", http.StatusUnauthorized},
			{"wrong key", "wrong", http.StatusUnauthorized},
			{"key prefix", testKey[:len(testKey)-1], http.StatusUnauthorized},
			{"key with more", testKey + "x", http.StatusUnauthorized},
			{"other case", strings.ToUpper(testKey), http.StatusUnauthorized},
		}
		for _, r := range routes {
			for _, k := range keys {
				t.Run(r.method+" "+r.path+"/"+k.name, func(t *testing.T) {
					h := newHarnessOn(t, st)
					w := h.reqKey(r.method, r.path, r.body, k.key)
					if w.Code != k.status {
						t.Fatalf("HTTP %d %s; want %d", w.Code, w.Body, k.status)
					}
					errorMessage(t, w)
					if strings.Contains(w.Body.String(), testKey) {
						t.Fatalf("the answer holds the key: %s", w.Body)
					}
					if v := w.Header().Get(ExtensionsHeader); v != "" {
						t.Fatalf("a refused request is told the extensions: %s", v)
					}
				})
			}
			t.Run(r.method+" "+r.path+"/right key", func(t *testing.T) {
				h := newHarnessOn(t, st)
				h.register(`{"name":"s","address":"h","port":1}`)
				w := h.req(r.method, r.path, r.body)
				if w.Code == http.StatusUnauthorized {
					t.Fatalf("the right key refused: %s", w.Body)
				}
				// Every answer to the key announces the extensions, a
				// contract answer first of all.
				if v := w.Header().Get(ExtensionsHeader); v != "batch-heartbeat, batch-register, watch" {
					t.Fatalf("%s: %q; want the three extensions", ExtensionsHeader, v)
				}
			})
		}
	})
}

// Unknown routes and wrong methods answer JSON too.
func TestR7RoutesAndMethods(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		tests := []struct {
			method, path string
			status       int
		}{
			{http.MethodGet, PathRegister, http.StatusMethodNotAllowed},
			{http.MethodPut, PathHeartbeat, http.StatusMethodNotAllowed},
			{http.MethodPost, PathServices, http.StatusMethodNotAllowed},
			{http.MethodPost, PathExport, http.StatusMethodNotAllowed},
			{http.MethodGet, "/api/v1/services/unknown", http.StatusNotFound},
			{http.MethodGet, "/", http.StatusNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.method+" "+tt.path, func(t *testing.T) {
				w := newHarnessOn(t, st).req(tt.method, tt.path, "")
				if w.Code != tt.status {
					t.Fatalf("HTTP %d %s; want %d", w.Code, w.Body, tt.status)
				}
				errorMessage(t, w)
			})
		}
	})
}

// Bodies the registry refuses, each with a message naming what is wrong.
func TestBadRequests(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		big := `{"name":"s","address":"h","port":1,"metadata":{"k":"` + strings.Repeat("x", MaxBodyBytes) + `"}}`
		tests := []struct {
			name, path, body string
			status           int
			msg              string
		}{
			{"missing name", PathRegister, `{"address":"h","port":1}`, 400, "name is required"},
			{"blank name", PathRegister, `{"name":"  ","address":"h","port":1}`, 400, "name is required"},
			{"missing address", PathRegister, `{"name":"s","port":1}`, 400, "address is required"},
			{"missing port", PathRegister, `{"name":"s","address":"h"}`, 400, "port is required"},
			{"port 0", PathRegister, `{"name":"s","address":"h","port":0}`, 400, "port is required"},
			{"port too big", PathRegister, `{"name":"s","address":"h","port":65536}`, 400, "port 65536"},
			{"negative weight", PathRegister, `{"name":"s","address":"h","port":1,"weight":-1}`, 400, "weight"},
			{"port as a string", PathRegister, `{"name":"s","address":"h","port":"80"}`, 400, "port"},
			{"unknown field", PathRegister, `{"name":"s","address":"h","port":1,"colour":"red"}`, 400, `unknown field "colour"`},
			{"malformed", PathRegister, `{"name":"s",`, 400, "malformed"},
			{"not an object", PathRegister, `[1]`, 400, "malformed"},
			{"trailing data", PathRegister, `{"name":"s","address":"h","port":1} {}`, 400, "trailing"},
			{"empty body", PathRegister, ``, 400, "empty"},
			{"oversized", PathRegister, big, 413, "over 65536 bytes"},
			{"heartbeat without id", PathHeartbeat, `{}`, 400, "id is required"},
			{"heartbeat unknown field", PathHeartbeat, `{"id":"a","ttl":1}`, 400, "unknown field"},
			{"deregister malformed", PathDeregister, `id=a`, 400, "malformed"},
			{"deregister oversized", PathDeregister, `{"id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, "over"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarnessOn(t, st)
				w := h.req(http.MethodPost, tt.path, tt.body)
				if w.Code != tt.status {
					t.Fatalf("HTTP %d %s; want %d", w.Code, w.Body, tt.status)
				}
				if msg := errorMessage(t, w); !strings.Contains(msg, tt.msg) {
					t.Fatalf("message %q does not say %q", msg, tt.msg)
				}
				if n := h.count(); n != 0 {
					t.Fatalf("a refused registration stored %d instances", n)
				}
			})
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no key", Config{}},
		{"negative ttl", Config{Key: "k", DefaultTTL: -time.Second}},
		{"negative reap interval", Config{Key: "k", ReapInterval: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
