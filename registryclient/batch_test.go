package registryclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

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

// A registry that does not know the batch form (400 on the unknown field,
// as the contract's own does) gets one heartbeat per id, from then on.
func TestHeartbeatManyFallsBack(t *testing.T) {
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
	if batches.Load() != 1 || singles.Load() != 6 {
		t.Fatalf("%d batch and %d single requests; want 1 and 6", batches.Load(), singles.Load())
	}
}
