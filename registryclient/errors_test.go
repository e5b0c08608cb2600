package registryclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// call is one client method, run for the error it returns.
type call struct {
	name string
	run  func(context.Context, *registryclient.Client) error
}

var calls = []call{
	{"register", func(ctx context.Context, c *registryclient.Client) error {
		_, _, err := c.Register(ctx, registryclient.Instance{Name: "s", Address: "h", Port: 1})
		return err
	}},
	{"heartbeat", func(ctx context.Context, c *registryclient.Client) error { return c.Heartbeat(ctx, "s-h-1") }},
	{"deregister", func(ctx context.Context, c *registryclient.Client) error { return c.Deregister(ctx, "s-h-1") }},
	{"names", func(ctx context.Context, c *registryclient.Client) error { _, err := c.Names(ctx); return err }},
	{"instances", func(ctx context.Context, c *registryclient.Client) error {
		_, err := c.Instances(ctx, false)
		return err
	}},
	{"export", func(ctx context.Context, c *registryclient.Client) error { _, err := c.Export(ctx); return err }},
}

var sentinels = []error{registryclient.ErrGone, registryclient.ErrNotFound, registryclient.ErrUnauthorized, registryclient.ErrBadRequest, registryclient.ErrConflict}

// Each status maps to its sentinel, for the calls where it means one; any
// other error wraps none of them.
func TestStatusMapping(t *testing.T) {
	tests := []struct {
		status int
		want   map[string]error // by call name; absent = no sentinel
	}{
		{401, map[string]error{"register": registryclient.ErrUnauthorized, "heartbeat": registryclient.ErrUnauthorized,
			"deregister": registryclient.ErrUnauthorized, "names": registryclient.ErrUnauthorized,
			"instances": registryclient.ErrUnauthorized, "export": registryclient.ErrUnauthorized}},
		{403, map[string]error{"register": registryclient.ErrUnauthorized, "heartbeat": registryclient.ErrUnauthorized,
			"deregister": registryclient.ErrUnauthorized, "names": registryclient.ErrUnauthorized,
			"instances": registryclient.ErrUnauthorized, "export": registryclient.ErrUnauthorized}},
		{400, map[string]error{"register": registryclient.ErrBadRequest, "heartbeat": registryclient.ErrBadRequest,
			"deregister": registryclient.ErrBadRequest, "names": registryclient.ErrBadRequest,
			"instances": registryclient.ErrBadRequest, "export": registryclient.ErrBadRequest}},
		{410, map[string]error{"heartbeat": registryclient.ErrGone}},
		{404, map[string]error{"deregister": registryclient.ErrNotFound}},
		{409, map[string]error{"register": registryclient.ErrConflict, "heartbeat": registryclient.ErrConflict,
			"deregister": registryclient.ErrConflict, "names": registryclient.ErrConflict,
			"instances": registryclient.ErrConflict, "export": registryclient.ErrConflict}},
		{413, nil},
		{500, nil},
		{503, nil},
		{302, nil}, // not followed: the key would go wherever it points
	}
	for _, tt := range tests {
		var followed atomic.Bool
		c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				followed.Store(true)
				return
			}
			if tt.status == 302 {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			fmt.Fprintf(w, `{"error":"the registry says %d"}`, tt.status)
		})
		for _, cl := range calls {
			t.Run(fmt.Sprintf("%d/%s", tt.status, cl.name), func(t *testing.T) {
				err := cl.run(context.Background(), c)
				if err == nil {
					t.Fatal("no error")
				}
				for _, s := range sentinels {
					if errors.Is(err, s) != (tt.want[cl.name] == s) {
						t.Fatalf("%v: errors.Is(%v) = %v", err, s, errors.Is(err, s))
					}
				}
				var se *registryclient.StatusError
				if !errors.As(err, &se) || se.StatusCode != tt.status || se.Op == "" {
					t.Fatalf("%#v: not a *StatusError with status %d", err, tt.status)
				}
				if tt.status != 302 && !strings.Contains(err.Error(), fmt.Sprintf("the registry says %d", tt.status)) {
					t.Fatalf("%v: the registry's message is lost", err)
				}
				noKey(t, err, key)
			})
		}
		if followed.Load() {
			t.Fatal("a redirect was followed")
		}
	}
}

// A registry that never answers costs the timeout, not a hang.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, registryclient.WithTimeout(150*time.Millisecond))
	for _, cl := range calls {
		t.Run(cl.name, func(t *testing.T) {
			start := time.Now()
			err := cl.run(context.Background(), c)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v; want a deadline error", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("took %v with a 150ms timeout", d)
			}
			for _, s := range sentinels {
				if errors.Is(err, s) {
					t.Fatalf("%v wraps %v", err, s)
				}
			}
			noKey(t, err, key)
		})
	}
	// The caller's context still counts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Heartbeat(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	path, key := keyFile(t)
	c, err := registryclient.New("http://127.0.0.1:1", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Heartbeat(context.Background(), "x")
	if err == nil || !strings.Contains(err.Error(), "registry heartbeat") {
		t.Fatalf("%v; want a transport error saying what was tried", err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Fatalf("%v wraps %v", err, s)
		}
	}
	noKey(t, err, key)
}

// The client refuses answers it cannot trust, and reads at most
// MaxResponseBytes of any.
func TestMalformedAndOversizedAnswers(t *testing.T) {
	huge := strings.Repeat("x", registryclient.MaxResponseBytes+1)
	tests := []struct {
		name   string
		status int
		body   string
		call   string
		msg    string
	}{
		{"register not JSON", 200, "<html>", "register", "malformed"},
		{"register without id", 200, `{"created":true}`, "register", "no id"},
		{"names wrong type", 200, `{"services":"a"}`, "names", "malformed"},
		{"names missing", 200, `{}`, "names", "no services"},
		{"instances missing", 200, `{"services":[]}`, "instances", "no instances"},
		{"instance without id", 200, `{"instances":[{"name":"a"}]}`, "instances", "no id"},
		{"names oversized", 200, `{"services":["` + huge + `"]}`, "names", "larger than"},
		{"export oversized", 200, huge, "export", "larger than"},
		{"error oversized", 500, huge, "heartbeat", "larger than"},
		{"error not JSON", 502, "<h1>Bad \x00Gateway</h1>\n" + strings.Repeat("y", 1000), "heartbeat", "HTTP 502 Bad Gateway: <h1>Bad Gateway</h1>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			var run func(context.Context, *registryclient.Client) error
			for _, cl := range calls {
				if cl.name == tt.call {
					run = cl.run
				}
			}
			err := run(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v; want an error saying %q", err, tt.msg)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes: a registry's answer is quoted in full", len(err.Error()))
			}
			noKey(t, err, key)
		})
	}
}

// A registry that echoes the key back does not put it in an error.
func TestKeyNeverInErrors(t *testing.T) {
	for _, status := range []int{400, 401, 410, 500} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"error":"you sent %s"}`, r.Header.Get("X-API-Key"))
			})
			for _, cl := range calls {
				err := cl.run(context.Background(), c)
				if err == nil || !strings.Contains(err.Error(), "[key redacted]") {
					t.Fatalf("%s: %v; want the echoed key redacted", cl.name, err)
				}
				noKey(t, err, key)
			}
		})
	}
	// Not JSON, and not an error status either.
	c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "key=%s", r.Header.Get("X-API-Key"))
	})
	_, _, err := c.Register(context.Background(), registryclient.Instance{Name: "s", Address: "h", Port: 1})
	noKey(t, err, key)
}

// The key travels only in X-API-Key: not in the URL, not in the body.
func TestKeyOnlyInHeader(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	c, key := fake(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+" "+string(b)+" "+r.Header.Get("X-API-Key"))
		mu.Unlock()
		w.WriteHeader(500)
	})
	for _, cl := range calls {
		_ = cl.run(context.Background(), c)
	}
	for _, s := range seen {
		if strings.Count(s, key) != 1 || !strings.HasSuffix(s, " "+key) {
			t.Fatalf("request %q: the key must be in the header only", s)
		}
	}
	if len(seen) != len(calls) {
		t.Fatalf("%d requests", len(seen))
	}
}
