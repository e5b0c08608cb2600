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

// With a registry that takes batch registers, instances wanted together
// register together: 1,200 instances of a start in a few requests, all
// registered before the first is due to heart-beat.
func TestBatchRegisters(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "registry.key")
	key, _, err := registry.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var registers atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/register") {
			registers.Add(1)
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
	for i := range 1200 {
		ins = append(ins, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "h", Port: 1 + i, Healthy: true, TTL: int64(30 * time.Second)})
	}
	r.Set("w", ins)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Registered < len(ins) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v after 5 s", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 1,200 in batches of at most MaxBatch, and of MaxBatchBytes.
	if n := registers.Load(); n > 12 {
		t.Fatalf("%d register requests for %d instances: not batched", n, len(ins))
	}
	t.Logf("%d instances registered in %d requests", len(ins), registers.Load())
}
