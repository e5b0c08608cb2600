package registry

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// R1: the wire shape, with its defaults and server stamps.
func TestR1WireShape(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		tests := []struct {
			name string
			body string
			want map[string]any // JSON fields of the listed instance
		}{
			{"defaults", `{"name":"web","address":"10.0.0.1","port":80}`, map[string]any{
				"id": "web-10.0.0.1-80", "name": "web", "address": "10.0.0.1", "port": 80.0,
				"protocol": "tcp", "tags": []any{}, "metadata": map[string]any{},
				"weight": 100.0, "priority": 10.0, "healthy": true, "ttl_ns": float64(DefaultTTL),
				"registered_at": t0.Format(time.RFC3339), "updated_at": t0.Format(time.RFC3339),
			}},
			{"explicit", `{"id":"w1","name":"web","address":"h","port":53,"protocol":"UDP","tags":["a=b"],
				"metadata":{"k":"v"},"weight":5,"priority":1,"healthy":false,"ttl_ns":1000000000,
				"registered_at":"2001-01-01T00:00:00Z"}`, map[string]any{
				"id": "w1", "name": "web", "address": "h", "port": 53.0,
				"protocol": "udp", "tags": []any{"a=b"}, "metadata": map[string]any{"k": "v"},
				"weight": 5.0, "priority": 1.0, "healthy": false, "ttl_ns": 1e9,
				// Server-stamped: what the registrant sent is ignored.
				"registered_at": t0.Format(time.RFC3339), "updated_at": t0.Format(time.RFC3339),
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarnessOn(t, st)
				h.register(tt.body)
				var out struct {
					Instances []map[string]any `json:"instances"`
				}
				decodeBody(t, h.must(http.StatusOK, http.MethodGet, PathServices+"?detail=1", ""), &out)
				if len(out.Instances) != 1 {
					t.Fatalf("%d instances", len(out.Instances))
				}
				if got := out.Instances[0]; !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("instance\n got %v\nwant %v", got, tt.want)
				}
			})
		}
	})
}

// R2: an idempotent upsert that answers {id, created}.
func TestR2RegisterUpsert(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		first := h.register(`{"name":"web","address":"10.0.0.1","port":80,"tags":["v1"]}`)
		if first != (registered{"web-10.0.0.1-80", true}) {
			t.Fatalf("first registration: %+v", first)
		}
		h.clk.Add(10 * time.Second)
		again := h.register(`{"name":"web","address":"10.0.0.1","port":80,"tags":["v2"],"healthy":false}`)
		if again != (registered{"web-10.0.0.1-80", false}) {
			t.Fatalf("second registration: %+v", again)
		}
		ins := h.instances("")
		if len(ins) != 1 {
			t.Fatalf("upsert duplicated the instance: %+v", ins)
		}
		in := ins[0]
		if !in.RegisteredAt.Equal(t0) || !in.UpdatedAt.Equal(t0.Add(10*time.Second)) {
			t.Errorf("registered_at %v updated_at %v: registered_at kept, updated_at renewed", in.RegisteredAt, in.UpdatedAt)
		}
		if !slices.Equal(in.Tags, []string{"v2"}) || in.Healthy {
			t.Errorf("mutable fields not refreshed: tags %v healthy %v", in.Tags, in.Healthy)
		}

		// An explicit id is kept; another address under it replaces the old.
		if r := h.register(`{"id":"x","name":"api","address":"a","port":1}`); r != (registered{"x", true}) {
			t.Fatalf("explicit id: %+v", r)
		}
		if r := h.register(`{"id":"x","name":"api","address":"b","port":2}`); r != (registered{"x", false}) {
			t.Fatalf("explicit id again: %+v", r)
		}
		if got := h.ids(""); !slices.Equal(got, []string{"x", "web-10.0.0.1-80"}) {
			t.Fatalf("ids %v", got)
		}

		// Registering an expired instance creates it anew.
		h.lapse("web-10.0.0.1-80")
		if r := h.register(`{"name":"web","address":"10.0.0.1","port":80}`); !r.Created {
			t.Fatalf("re-registering an expired instance: %+v", r)
		}
		if in := h.instances("&healthy_only=1")[0]; !in.RegisteredAt.Equal(h.clk.Now()) {
			t.Fatalf("registered_at %v of a re-created instance", in.RegisteredAt)
		}
	})
}

// R4: deregistration removes at once; unknown is 404.
func TestR4Deregister(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		tests := []struct {
			name   string
			setup  func(h *harness)
			id     string
			status int
		}{
			{"registered", func(h *harness) { h.register(`{"id":"a","name":"s","address":"h","port":1}`) }, "a", http.StatusOK},
			{"unknown", func(*harness) {}, "a", http.StatusNotFound},
			{"twice", func(h *harness) {
				h.register(`{"id":"a","name":"s","address":"h","port":1}`)
				h.must(http.StatusOK, http.MethodPost, PathDeregister, `{"id":"a"}`)
			}, "a", http.StatusNotFound},
			{"expired", func(h *harness) {
				h.register(`{"id":"a","name":"s","address":"h","port":1,"ttl_ns":1000}`)
				h.lapse("a")
			}, "a", http.StatusNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarnessOn(t, st)
				h.register(`{"id":"other","name":"s","address":"h","port":2}`)
				tt.setup(h)
				w := h.req(http.MethodPost, PathDeregister, `{"id":"`+tt.id+`"}`)
				if w.Code != tt.status {
					t.Fatalf("HTTP %d %s; want %d", w.Code, w.Body, tt.status)
				}
				if w.Code != http.StatusOK {
					errorMessage(t, w)
				}
				if got := h.ids(""); !slices.Equal(got, []string{"other"}) {
					t.Fatalf("left %v; want only the other instance", got)
				}
			})
		}
	})
}

// R5: jet.domain in metadata or as a tag is preserved and exported.
func TestR5EdgeOptIn(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		tests := []struct {
			name, body, domain string
		}{
			{"metadata", `{"metadata":{"jet.domain":"voice.koder.dev"}}`, "voice.koder.dev"},
			{"tag", `{"tags":["api=http","jet.domain=voice.koder.dev"]}`, "voice.koder.dev"},
			{"metadata wins over tag", `{"metadata":{"jet.domain":"a.dev"},"tags":["jet.domain=b.dev"]}`, "a.dev"},
			{"internal-only", `{"tags":["jet.domain="],"metadata":{"x":"y"}}`, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarnessOn(t, st)
				var extra map[string]any
				if err := json.Unmarshal([]byte(tt.body), &extra); err != nil {
					t.Fatal(err)
				}
				body := map[string]any{"name": "voice", "address": "h", "port": 7}
				for k, v := range extra {
					body[k] = v
				}
				b, _ := json.Marshal(body)
				h.register(string(b))
				in := h.instances("")[0]
				if !reflect.DeepEqual(in.Tags, toStrings(extra["tags"])) || in.Domain() != tt.domain {
					t.Fatalf("tags %v metadata %v domain %q; want tags kept and domain %q", in.Tags, in.Metadata, in.Domain(), tt.domain)
				}
				export := h.must(http.StatusOK, http.MethodGet, PathExport, "").Body.String()
				line := `domain = "` + tt.domain + `"`
				if tt.domain == "" {
					line = "domain ="
				}
				if has := strings.Contains(export, line); has != (tt.domain != "") {
					t.Fatalf("export has %q: %v\n%s", line, has, export)
				}
			})
		}
	})
}

func toStrings(v any) []string {
	out := []string{}
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}

// R6: healthy is preserved and ?healthy_only=1 filters.
func TestR6Health(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		h.register(`{"id":"up","name":"a","address":"h","port":1,"healthy":true}`)
		h.register(`{"id":"down","name":"b","address":"h","port":1,"healthy":false}`)
		h.register(`{"id":"silent","name":"c","address":"h","port":1}`)
		tests := []struct {
			query      string
			ids, names []string
		}{
			{"", []string{"up", "down", "silent"}, []string{"a", "b", "c"}},
			{"?healthy_only=1", []string{"up", "silent"}, []string{"a", "c"}},
			{"?healthy_only=true", []string{"up", "silent"}, []string{"a", "c"}},
			{"?healthy_only=0", []string{"up", "down", "silent"}, []string{"a", "b", "c"}},
		}
		for _, tt := range tests {
			t.Run(tt.query, func(t *testing.T) {
				q := tt.query
				if q != "" {
					q = "&" + q[1:]
				}
				if got := h.ids(q); !slices.Equal(got, tt.ids) {
					t.Errorf("instances %v; want %v", got, tt.ids)
				}
				if got := h.names(tt.query); !slices.Equal(got, tt.names) {
					t.Errorf("names %v; want %v", got, tt.names)
				}
			})
		}
		if in := h.instances("")[1]; in.ID != "down" || in.Healthy {
			t.Fatalf("unhealthy instance listed as %+v", in)
		}
		if w := h.req(http.MethodGet, PathServices+"?healthy_only=maybe", ""); w.Code != http.StatusBadRequest {
			t.Fatalf("healthy_only=maybe: HTTP %d", w.Code)
		}
	})
}

// The list answers: names sorted and unique, instances sorted by name, id.
func TestListOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		for _, b := range []string{
			`{"name":"web","address":"h2","port":2}`, `{"name":"api","address":"h","port":9}`,
			`{"name":"web","address":"h1","port":2}`, `{"name":"db","address":"h","port":5432}`,
		} {
			h.register(b)
		}
		if got := h.names(""); !slices.Equal(got, []string{"api", "db", "web"}) {
			t.Fatalf("names %v", got)
		}
		want := []string{"api-h-9", "db-h-5432", "web-h1-2", "web-h2-2"}
		if got := h.ids(""); !slices.Equal(got, want) {
			t.Fatalf("ids %v; want %v", got, want)
		}
		empty := newHarnessOn(t, st)
		if w := empty.must(http.StatusOK, http.MethodGet, PathServices, ""); w.Body.String() != "{\"services\":[]}\n" {
			t.Fatalf("empty registry: %s", w.Body)
		}
	})
}
