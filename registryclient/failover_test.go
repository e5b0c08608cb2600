package registryclient_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flyd-dev/flyd/registryclient"
)

// A client of several replicas moves past the ones that cannot answer,
// stays on the one that did, and does not move on an answer that is the
// registry's word (410, 404, 400).
func TestFailover(t *testing.T) {
	live := newRealRegistry(t)
	// A port that refuses connections: a replica that died.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	// A replica whose store lost its quorum.
	var unavailable atomic.Int64
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unavailable.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"register: registry store unavailable: no quorum"}`))
	}))
	defer sick.Close()

	c, err := registryclient.New(dead+", "+sick.URL+","+live.srv.URL, live.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id, created, err := c.Register(ctx, registryclient.Instance{Name: "web", Address: "h", Port: 1})
	if err != nil || !created {
		t.Fatalf("register across a dead and a sick replica: %q %v %v", id, created, err)
	}
	if unavailable.Load() != 1 {
		t.Fatalf("the sick replica was asked %d times; want once", unavailable.Load())
	}
	// Sticky: the next requests go straight to the replica that answered.
	for range 3 {
		if err := c.Heartbeat(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if unavailable.Load() != 1 {
		t.Fatalf("after failing over the client went back to the sick replica (%d requests)", unavailable.Load())
	}
	// The registry's own answers are final: a 410 is not tried elsewhere.
	if err := c.Heartbeat(ctx, "nobody"); !errors.Is(err, registryclient.ErrGone) {
		t.Fatalf("heartbeat of an unknown id: %v; want ErrGone", err)
	}
	if err := c.Deregister(ctx, "nobody"); !errors.Is(err, registryclient.ErrNotFound) {
		t.Fatalf("deregister of an unknown id: %v; want ErrNotFound", err)
	}
	if unavailable.Load() != 1 {
		t.Fatalf("a 410 or a 404 was retried on another replica")
	}

	// When none can answer, the error is the last one's, a 503 worth
	// retrying later, not a sentinel that would stop the registrar.
	down, err := registryclient.New(dead+","+sick.URL, live.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	err = down.Heartbeat(ctx, id)
	var se *registryclient.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "no quorum") {
		t.Fatalf("every replica down: %v; want the 503 with its message", err)
	}
}

func TestNewRefusesBadReplicaLists(t *testing.T) {
	path, _ := keyFile(t)
	for _, tt := range []struct{ urls, msg string }{
		{"http://a:1,", "scheme must be http or https"},
		{"http://a:1,http://", "no host"},
		{"http://a:1,ftp://b:2", "scheme must be http or https"},
		{"http://a:1,http://a:1/", "named twice"},
	} {
		if _, err := registryclient.New(tt.urls, path); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("New(%q): %v; want an error saying %q", tt.urls, err, tt.msg)
		}
	}
}
