package registryclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registry/contracttest"
	"github.com/flyd-dev/flyd/registryclient"
)

func manyInstances(n int) []registryclient.Instance {
	ins := make([]registryclient.Instance, n)
	for i := range ins {
		ins[i] = registryclient.Instance{ID: fmt.Sprintf("i%d", i), Name: "s", Address: "h", Port: 1 + i, Healthy: true}
	}
	return ins
}

// A registry that follows the contract to the letter (410 to a heartbeat
// naming no id, 400 to a register without name, address and port,
// unknown fields ignored) is spoken to in the contract alone: every id
// renewed, every instance registered, and a 410 only for what it forgot.
func TestManyAgainstStrictRegistry(t *testing.T) {
	path, key := keyFile(t)
	strict, url := contracttest.Serve(t, key)
	c, err := registryclient.New(url, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ins := append(manyInstances(20), registryclient.Instance{ID: "noport", Name: "s", Address: "h"})
	errs := c.RegisterMany(ctx, ins)
	for i, err := range errs[:20] {
		if err != nil {
			t.Fatalf("%s: %v", ins[i].ID, err)
		}
	}
	if !errors.Is(errs[20], registryclient.ErrBadRequest) {
		t.Fatalf("an instance without a port: %v; want ErrBadRequest", errs[20])
	}
	ids := make([]string, 0, 21)
	for _, in := range ins[:20] {
		ids = append(ids, in.ID)
	}
	ids = append(ids, "nobody")
	for round := range 3 {
		errs = c.HeartbeatMany(ctx, ids)
		for i, err := range errs[:20] {
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, ids[i], err)
			}
		}
		if !errors.Is(errs[20], registryclient.ErrGone) {
			t.Fatalf("round %d: an unknown id: %v; want ErrGone", round, errs[20])
		}
	}
	if n := strict.Requests("register"); n != 21 {
		t.Fatalf("%d register requests for 21 instances", n)
	}
	if n, gone := strict.Requests("heartbeat"), strict.Answers("heartbeat", http.StatusGone); n != 63 || gone != 3 {
		t.Fatalf("%d heartbeat requests, %d answered 410; want 63 and 3 (the unknown id's)", n, gone)
	}
	if e := c.Extensions(); !e.Known || e.BatchHeartbeat || e.BatchRegister || e.Watch {
		t.Fatalf("extensions %+v; want known, none", e)
	}
}

// A registry announced as taking the batches that does not (a replica of
// another version behind the same URL, or a proxy that added the header):
// its 410 to a batch heartbeat means nothing of the ids, its 400 or an
// answer without results to a batch register that it was not understood.
// Each is sent again in the contract, and the announcement is forgotten
// until the registry makes it again.
func TestBatchNotUnderstood(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lenient bool // answers a batch 200 without results
	}{{"strict", false}, {"ignores unknown fields", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path, key := keyFile(t)
			strict := contracttest.New(key)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(registryclient.ExtensionsHeader, "batch-heartbeat, batch-register")
				if tc.lenient && r.Body != nil {
					b, _ := io.ReadAll(r.Body)
					if bytes.HasPrefix(b, []byte(`{"ids":`)) || bytes.HasPrefix(b, []byte(`{"instances":`)) {
						w.Header().Set("Content-Type", "application/json")
						fmt.Fprint(w, `{"id":"","created":false}`)
						return
					}
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				strict.ServeHTTP(w, r)
			}))
			defer srv.Close()
			c, err := registryclient.New(srv.URL, path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			ins := manyInstances(10)
			for i, err := range c.RegisterMany(ctx, ins) {
				if err != nil {
					t.Fatalf("%s: %v", ins[i].ID, err)
				}
			}
			if n := len(strict.Instances()); n != 10 {
				t.Fatalf("%d instances registered of 10", n)
			}
			ids := make([]string, len(ins))
			for i := range ins {
				ids[i] = ins[i].ID
			}
			for i, err := range c.HeartbeatMany(ctx, ids) {
				if err != nil {
					t.Fatalf("%s: %v; a batch not understood is no answer of its ids", ids[i], err)
				}
			}
			if n := strict.Answers("heartbeat", http.StatusOK); n != 10 {
				t.Fatalf("%d heartbeats renewed; want 10", n)
			}
		})
	}
}

// flyd's registry announces the batches on its first answer, a contract
// one: the client sends the first id alone, and the rest in one batch.
func TestBatchAfterAnnouncement(t *testing.T) {
	path, key := keyFile(t)
	s, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		s.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := registryclient.New(srv.URL, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if e := c.Extensions(); e.Known {
		t.Fatalf("extensions %+v before any answer", e)
	}
	ins := manyInstances(100)
	for i, err := range c.RegisterMany(context.Background(), ins) {
		if err != nil {
			t.Fatalf("%s: %v", ins[i].ID, err)
		}
	}
	if requests != 2 {
		t.Fatalf("100 instances in %d requests; want 2 (the first alone, then a batch)", requests)
	}
	if e := c.Extensions(); !e.Known || !e.BatchHeartbeat || !e.BatchRegister || !e.Watch {
		t.Fatalf("extensions %+v; want all three", e)
	}
	ids := make([]string, len(ins))
	for i := range ins {
		ids[i] = ins[i].ID
	}
	requests = 0
	for i, err := range c.HeartbeatMany(context.Background(), ids) {
		if err != nil {
			t.Fatalf("%s: %v", ids[i], err)
		}
	}
	if requests != 1 {
		t.Fatalf("100 heartbeats in %d requests; want 1", requests)
	}
}
