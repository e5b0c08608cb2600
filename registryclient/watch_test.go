package registryclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// next reads one change within 10 s.
func next(t *testing.T, ch <-chan registryclient.Change) registryclient.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("the watch channel closed")
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no change within 10 s")
	}
	return registryclient.Change{}
}

func want(t *testing.T, ch <-chan registryclient.Change, typ, id string) registryclient.Change {
	t.Helper()
	c := next(t, ch)
	if c.Type != typ || c.Instance.ID != id {
		t.Fatalf("got %s %q at %d (%v); want %s %q", c.Type, c.Instance.ID, c.Rev, c.Err, typ, id)
	}
	return c
}

func inst(id string) registryclient.Instance {
	return registryclient.Instance{ID: id, Name: "svc", Address: "10.0.0.1", Port: 80, Healthy: true}
}

// TestWatchResumesAfterLostConnection: the reference registry's watch,
// from 0, then the connection cut while changes happen: each is told
// once, in order.
func TestWatchResumesAfterLostConnection(t *testing.T) {
	r := newRealRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := r.c.Register(ctx, inst("a")); err != nil {
		t.Fatal(err)
	}
	ch, err := r.c.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want(t, ch, registryclient.ChangePut, "a")
	want(t, ch, registryclient.ChangeSynced, "")
	if _, _, err := r.c.Register(ctx, inst("b")); err != nil {
		t.Fatal(err)
	}
	b := want(t, ch, registryclient.ChangePut, "b")
	if b.Instance.Name != "svc" || b.Instance.Port != 80 {
		t.Fatalf("put %+v", b.Instance)
	}
	r.srv.CloseClientConnections()
	// The cut took the idle connection of the requests too: one retry.
	if _, _, err := r.c.Register(ctx, inst("c")); err != nil {
		if _, _, err := r.c.Register(ctx, inst("c")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.c.Deregister(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want(t, ch, registryclient.ChangePut, "c")
	want(t, ch, registryclient.ChangeDelete, "a")
	cancel()
	for range ch { // closes once ctx is done
	}
}

// TestWatchRefused: a registry that refuses the key is Watch's error.
func TestWatchRefused(t *testing.T) {
	r := newRealRegistry(t)
	c, _ := fake(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	if _, err := c.Watch(context.Background(), 0); !errors.Is(err, registryclient.ErrUnauthorized) {
		t.Fatalf("watch with a refused key: %v", err)
	}
	if _, err := r.c.Watch(context.Background(), 1<<40); !errors.Is(err, registryclient.ErrCompacted) {
		t.Fatalf("watch from a revision to come: %v; want ErrCompacted", err)
	}
}

// scripted is a fake registry's watch: each request's answer by the
// revision it asks from.
type scripted struct {
	mu    sync.Mutex
	asked []string
	by    map[string]func(w http.ResponseWriter)
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("watch")
	s.mu.Lock()
	s.asked = append(s.asked, after)
	f := s.by[after]
	s.mu.Unlock()
	if f == nil {
		<-r.Context().Done()
		return
	}
	f(w)
}

func lines(ls ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range ls {
			fmt.Fprintln(w, l)
		}
	}
}

// TestWatchPartialRevisionAndRelist: a connection lost within a revision
// of several changes resumes from the revision before and tells the rest
// only; a 410 on resuming lists again, telling as deleted what went.
func TestWatchPartialRevisionAndRelist(t *testing.T) {
	s := &scripted{by: map[string]func(http.ResponseWriter){
		"0": lines(`{"rev":2,"type":"put","instance":{"id":"a","name":"svc"}}`,
			`{"rev":3,"type":"put","instance":{"id":"b","name":"svc"}}`,
			`{"rev":3,"type":"synced","instance":{}}`,
			`{"rev":5,"type":"delete","instance":{"id":"a","name":"svc"},"more":true}`),
		"3": lines(`{"rev":5,"type":"delete","instance":{"id":"a","name":"svc"},"more":true}`,
			`{"rev":5,"type":"put","instance":{"id":"c","name":"svc"}}`,
			`{"rev":6,"type":"put","instance":{"id":"d","name":"svc"}}`),
		"6": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusGone)
			fmt.Fprintln(w, `{"error":"compacted"}`)
		},
	}}
	c, _ := fake(t, s.serve)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want(t, ch, registryclient.ChangePut, "a")
	want(t, ch, registryclient.ChangePut, "b")
	want(t, ch, registryclient.ChangeSynced, "")
	want(t, ch, registryclient.ChangeDelete, "a")
	// Resumed from 3: a's delete is not told again.
	want(t, ch, registryclient.ChangePut, "c")
	want(t, ch, registryclient.ChangePut, "d")
	// From 6: 410, so a list again, where only c is left.
	s.mu.Lock()
	s.by["0"] = lines(`{"rev":5,"type":"put","instance":{"id":"c","name":"svc"}}`,
		`{"rev":9,"type":"synced","instance":{}}`)
	s.mu.Unlock()
	want(t, ch, registryclient.ChangePut, "c")
	got := map[string]bool{}
	for range 2 {
		d := next(t, ch)
		if d.Type != registryclient.ChangeDelete {
			t.Fatalf("got %s %q; want the deletes of what went", d.Type, d.Instance.ID)
		}
		got[d.Instance.ID] = true
	}
	if !got["b"] || !got["d"] {
		t.Fatalf("deleted %v; want b and d", got)
	}
	if sy := want(t, ch, registryclient.ChangeSynced, ""); sy.Rev != 9 {
		t.Fatalf("synced at %d; want 9", sy.Rev)
	}
	s.mu.Lock()
	asked := fmt.Sprint(s.asked)
	s.mu.Unlock()
	if asked != "[0 3 6 0]" {
		t.Fatalf("watches asked from %s; want [0 3 6 0]", asked)
	}
}
