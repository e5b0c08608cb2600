package registrar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// With a registry that takes batch heartbeats, heartbeats that fall due
// together go as one request: 300 instances on a 3 s lease beat about 100
// times a second in a handful of requests, and all stay registered.
func TestBatchHeartbeats(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "registry.key")
	key, _, err := registry.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/heartbeat") {
			requests.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	c, err := registryclient.New(hs.URL, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := New(Config{Registry: c})
	var ins []registryclient.Instance
	for i := range 300 {
		ins = append(ins, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "h", Port: 1 + i, Healthy: true, TTL: int64(3 * time.Second)})
	}
	r.Set("w", ins)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(4 * time.Second)
	st := r.Stats()
	if st.Registered != 300 || st.Failing != 0 || st.Heartbeats < 300 {
		t.Fatalf("stats %+v", st)
	}
	if n := requests.Load(); n*5 > int64(st.Heartbeats) {
		t.Fatalf("%d heartbeat requests for %d heartbeats: not batched", n, st.Heartbeats)
	}
	t.Logf("%d heartbeats in %d requests", st.Heartbeats, requests.Load())
}
