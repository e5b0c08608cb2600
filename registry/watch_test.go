package registry

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// watching is a watch over real HTTP, read line by line.
type watching struct {
	t      *testing.T
	cancel context.CancelFunc
	resp   *http.Response
	lines  chan wireChange
}

// watchFrom opens GET ?watch=after and fails the test unless it is 200.
func watchFrom(t *testing.T, base string, after int64) *watching {
	t.Helper()
	code, w := tryWatch(t, base, after)
	if code != http.StatusOK {
		t.Fatalf("watch from %d: HTTP %d", after, code)
	}
	return w
}

func tryWatch(t *testing.T, base string, after int64) (int, *watching) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+PathServices+"?watch="+itoa(after), nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}
	w := &watching{t: t, cancel: cancel, resp: resp, lines: make(chan wireChange, 100)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if len(sc.Bytes()) == 0 {
				continue
			}
			var c wireChange
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Errorf("line %s: %v", sc.Bytes(), err)
				return
			}
			w.lines <- c
		}
	}()
	t.Cleanup(w.close)
	return http.StatusOK, w
}

func (w *watching) close() { w.cancel(); w.resp.Body.Close() }

// next is the next line, within 10 s.
func (w *watching) next() wireChange {
	w.t.Helper()
	select {
	case c, ok := <-w.lines:
		if !ok {
			w.t.Fatal("the watch ended")
		}
		return c
	case <-time.After(10 * time.Second):
		w.t.Fatal("no change within 10 s")
	}
	return wireChange{}
}

// expect reads one change and checks its type and id.
func (w *watching) expect(typ, id string) wireChange {
	w.t.Helper()
	c := w.next()
	if c.Type != typ || c.Instance.ID != id {
		w.t.Fatalf("got %s %q at %d; want %s %q", c.Type, c.Instance.ID, c.Rev, typ, id)
	}
	return c
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func reg(id string) string {
	return `{"id":"` + id + `","name":"svc","address":"10.0.0.1","port":80}`
}

// TestWatchSnapshotThenChanges: from 0, every instance as it is, oldest
// write first, then synced, then each change as it happens with growing
// revisions; a heartbeat is none.
func TestWatchSnapshotThenChanges(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		base, _ := serve(t, h.s)
		h.register(reg("b"))
		h.register(reg("a"))
		w := watchFrom(t, base, 0)
		b := w.expect(ChangePut, "b")
		a := w.expect(ChangePut, "a")
		if !(b.Rev < a.Rev) || a.More {
			t.Fatalf("snapshot revisions %d, %d (more %v): want the order of the writes", b.Rev, a.Rev, a.More)
		}
		sync := w.expect(ChangeSynced, "")
		if sync.Rev < a.Rev {
			t.Fatalf("synced at %d, before the last write %d", sync.Rev, a.Rev)
		}
		if h.heartbeat("a") != http.StatusOK {
			t.Fatal("heartbeat")
		}
		h.register(reg("c"))
		c := w.expect(ChangePut, "c")
		if c.Rev <= sync.Rev || c.Instance.Name != "svc" || c.Instance.Port != 80 {
			t.Fatalf("put %+v", c)
		}
		h.must(http.StatusOK, http.MethodPost, PathDeregister, `{"id":"a"}`)
		d := w.expect(ChangeDelete, "a")
		if d.Rev <= c.Rev || d.Instance.Name != "svc" {
			t.Fatalf("delete %+v", d)
		}
	})
}

// TestWatchResumes: a watch from a revision seen tells exactly what came
// after it, while the watcher was away.
func TestWatchResumes(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		base, _ := serve(t, h.s)
		h.register(reg("a"))
		w := watchFrom(t, base, 0)
		w.expect(ChangePut, "a")
		last := w.expect(ChangeSynced, "").Rev
		w.close()
		h.register(reg("b"))
		h.must(http.StatusOK, http.MethodPost, PathDeregister, `{"id":"a"}`)
		w = watchFrom(t, base, last)
		w.expect(ChangePut, "b")
		w.expect(ChangeDelete, "a")
		h.register(reg("c"))
		w.expect(ChangePut, "c")
	})
}

// TestWatchCompacted: a revision the store no longer keeps, or never
// had, is 410 before any stream begins.
func TestWatchCompacted(t *testing.T) {
	eachStore(t, func(t *testing.T, st storeKind) {
		h := newHarnessOn(t, st)
		base, _ := serve(t, h.s)
		h.register(reg("a"))
		w := watchFrom(t, base, 0)
		w.expect(ChangePut, "a")
		first := w.expect(ChangeSynced, "").Rev
		w.close()
		for _, id := range []string{"b", "c", "d"} {
			h.register(reg(id))
		}
		if st == etcd {
			resp, err := h.etcd.cli.Get(context.Background(), h.etcd.key("d"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.etcd.cli.Compact(context.Background(), resp.Header.Revision); err != nil {
				t.Fatal(err)
			}
		} else {
			h.s.mem.mu.Lock()
			h.s.mem.w.max = 2
			h.s.mem.mu.Unlock()
			h.register(reg("e"))
		}
		if code, _ := tryWatch(t, base, first); code != http.StatusGone {
			t.Fatalf("watch from a compacted revision: HTTP %d; want 410", code)
		}
		if code, _ := tryWatch(t, base, 1<<40); code != http.StatusGone {
			t.Fatalf("watch from a revision to come: HTTP %d; want 410", code)
		}
		if code := h.req(http.MethodGet, PathServices+"?watch=x", "").Code; code != http.StatusBadRequest {
			t.Fatalf("watch=x: HTTP %d", code)
		}
		if code := h.req(http.MethodGet, PathServices+"?watch=0&healthy_only=1", "").Code; code != http.StatusBadRequest {
			t.Fatalf("watch with healthy_only: HTTP %d", code)
		}
	})
}

// TestWatchMemoryExpiry: the memory store tells an expiry when its reaper
// removes the instance.
func TestWatchMemoryExpiry(t *testing.T) {
	h := newHarness(t)
	base, _ := serve(t, h.s)
	h.register(`{"id":"a","name":"svc","address":"10.0.0.1","port":80,"ttl_ns":1000000000}`)
	w := watchFrom(t, base, 0)
	w.expect(ChangePut, "a")
	w.expect(ChangeSynced, "")
	h.clk.Add(2 * time.Second)
	h.s.Reap(h.clk.Now())
	w.expect(ChangeDelete, "a")
}

// TestWatchMemoryAcrossRestart: the memory store's revisions survive a
// clean restart on its snapshot, so a watch resumes; after a snapshot not
// written as the registry stopped, a resume is 410 and the watcher lists
// again.
func TestWatchMemoryAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.json")
	open := func() (*Server, string, func() error) {
		s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, SnapshotPath: path})
		if err != nil {
			t.Fatal(err)
		}
		base, stop := serve(t, s)
		return s, base, stop
	}
	s, base, stop := open()
	h := &harness{t: t, s: s}
	h.register(reg("a"))
	h.register(reg("b"))
	w := watchFrom(t, base, 0)
	w.expect(ChangePut, "a")
	w.expect(ChangePut, "b")
	last := w.expect(ChangeSynced, "").Rev
	if err := stop(); err != nil { // ends the watch too
		t.Fatal(err)
	}
	s, base, stop = open()
	h.s = s
	h.register(reg("c"))
	w = watchFrom(t, base, last)
	w.expect(ChangePut, "c")
	// Snapshot as a crash would leave it, then restart.
	w.close()
	if err := s.writeSnapshot(false); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, SnapshotPath: path})
	if err != nil {
		t.Fatal(err)
	}
	base2, _ := serve(t, s2)
	if code, _ := tryWatch(t, base2, last+1); code != http.StatusGone {
		t.Fatalf("resume after an unclean restart: HTTP %d; want 410", code)
	}
	w = watchFrom(t, base2, 0)
	for _, id := range []string{"a", "b", "c"} {
		w.expect(ChangePut, id)
	}
	w.expect(ChangeSynced, "")
	_ = stop
}
