package registryclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// HeartbeatMany against the reference registry: an answer per id, in
// order, over requests of at most MaxBatch ids.
func TestHeartbeatMany(t *testing.T) {
	r := newRealRegistry(t)
	ctx := context.Background()
	var ids []string
	for i := range registryclient.MaxBatch + 3 {
		id, _, err := r.c.Register(ctx, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "h", Port: 1 + i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	ids = append(ids, "nobody")
	errs := r.c.HeartbeatMany(ctx, ids)
	for i, err := range errs[:len(errs)-1] {
		if err != nil {
			t.Fatalf("%s: %v", ids[i], err)
		}
	}
	if err := errs[len(errs)-1]; !errors.Is(err, registryclient.ErrGone) {
		t.Fatalf("unknown id: %v; want ErrGone", err)
	}
}

// A registry that announces no extension is never sent a batch, whatever
// it would answer to one: here, 400 on the unknown field.
func TestHeartbeatManyWithoutAnnouncement(t *testing.T) {
	var batches, singles atomic.Int32
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		w.Header().Set("Content-Type", "application/json")
		if _, ok := b["ids"]; ok {
			batches.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"malformed request body: json: unknown field \"ids\""}`)
			return
		}
		singles.Add(1)
		if b["id"] == "gone" {
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"error":"register again"}`)
			return
		}
		fmt.Fprint(w, `{"id":"x"}`)
	})
	ctx := context.Background()
	for range 2 {
		errs := c.HeartbeatMany(ctx, []string{"a", "gone", "b"})
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], registryclient.ErrGone) {
			t.Fatalf("errors %v", errs)
		}
	}
	if batches.Load() != 0 || singles.Load() != 6 {
		t.Fatalf("%d batch and %d single requests; want 0 and 6", batches.Load(), singles.Load())
	}
	if e := c.Extensions(); !e.Known || e.BatchHeartbeat || e.BatchRegister {
		t.Fatalf("extensions %+v; want known, none", e)
	}
}

// RegisterMany against the reference registry: an error per instance, in
// order, over requests of at most MaxBatch instances and MaxBatchBytes.
func TestRegisterMany(t *testing.T) {
	var requests atomic.Int32
	path, key := keyFile(t)
	s, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		s.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := registryclient.New(srv.URL, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var ins []registryclient.Instance
	for i := range registryclient.MaxBatch + 3 {
		ins = append(ins, registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "h", Port: 1 + i, Healthy: true})
	}
	ins = append(ins, registryclient.Instance{ID: "noport", Name: "s", Address: "h"})
	errs := c.RegisterMany(ctx, ins)
	for i, err := range errs[:len(errs)-1] {
		if err != nil {
			t.Fatalf("%s: %v", ins[i].ID, err)
		}
	}
	if err := errs[len(errs)-1]; !errors.Is(err, registryclient.ErrBadRequest) {
		t.Fatalf("an instance without a port: %v; want ErrBadRequest", err)
	}
	// The first alone, whose answer announces the batch, then batches.
	if n := requests.Load(); n != 3 {
		t.Fatalf("%d instances in %d requests; want 3", len(ins), n)
	}
	listed, err := c.Instances(ctx, false)
	if err != nil || len(listed) != registryclient.MaxBatch+3 {
		t.Fatalf("%d listed (%v)", len(listed), err)
	}

	// Large instances: as many requests as MaxBatchBytes takes.
	big := strings.Repeat("x", 1000)
	requests.Store(0)
	ins = ins[:100]
	for i := range ins {
		ins[i].Metadata = map[string]string{"note": big}
	}
	for i, err := range c.RegisterMany(ctx, ins) {
		if err != nil {
			t.Fatalf("%s: %v", ins[i].ID, err)
		}
	}
	if n, want := int(requests.Load()), 100*1000/registryclient.MaxBatchBytes+1; n < want || n > want+1 {
		t.Fatalf("100 instances of 1 KiB in %d requests; want %d", n, want)
	}
}

// A registry that announces no extension gets one register per instance,
// whatever it would answer to a batch.
func TestRegisterManyWithoutAnnouncement(t *testing.T) {
	var batches, singles atomic.Int32
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		w.Header().Set("Content-Type", "application/json")
		if _, ok := b["instances"]; ok {
			batches.Add(1)
			fmt.Fprint(w, `{"id":"ignored","created":true}`)
			return
		}
		singles.Add(1)
		if b["port"] == float64(0) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"port is required"}`)
			return
		}
		fmt.Fprintf(w, `{"id":%q,"created":true}`, b["id"])
	})
	ctx := context.Background()
	ins := []registryclient.Instance{{ID: "a", Name: "s", Address: "h", Port: 1}, {ID: "bad", Name: "s", Address: "h"}, {ID: "b", Name: "s", Address: "h", Port: 2}}
	for range 2 {
		errs := c.RegisterMany(ctx, ins)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], registryclient.ErrBadRequest) {
			t.Fatalf("errors %v", errs)
		}
	}
	if batches.Load() != 0 || singles.Load() != 6 {
		t.Fatalf("%d batch and %d single requests; want 0 and 6", batches.Load(), singles.Load())
	}
}
