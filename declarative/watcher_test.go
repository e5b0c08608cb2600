package declarative

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/status"
	"go.uber.org/zap/zaptest"
)

func TestNewRefusesIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{Applier: newFakeApplier(nil)}, "no directory"},
		{"no applier", Config{Dir: t.TempDir()}, "no applier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func newTestWatcher(t *testing.T, dir string, fake *fakeApplier) *Watcher {
	t.Helper()
	w, err := New(Config{Dir: dir, Applier: fake, Logger: zaptest.NewLogger(t), Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A directory that cannot be listed must not look empty: that would delete
// every workload its files own.
func TestUnreadableDirectoryChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", wl("x", "v1"))
	fake := newFakeApplier(nil)
	w := newTestWatcher(t, dir, fake)
	ctx := context.Background()
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Replace the directory by a file: ReadDir fails with ENOTDIR.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err == nil {
		t.Fatal("Sync of a directory that is a file: no error")
	}
	if got := fake.state(); got != "x a.yaml /bin/v1" {
		t.Errorf("workloads %q, want x kept", got)
	}
	if ps := w.Problems(); len(ps) != 1 || ps[0].File != "" {
		t.Errorf("problems %v, want one for the directory", ps)
	}
}

func TestOwnedFailureIsRetried(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", wl("x", "v1"))
	fake := newFakeApplier(map[string]string{"gone": "gone.yaml"})
	fake.failOwned = errDiskFull
	w := newTestWatcher(t, dir, fake)
	ctx := context.Background()
	if err := w.Sync(ctx); !errors.Is(err, errDiskFull) {
		t.Fatalf("Sync: %v, want %v", err, errDiskFull)
	}
	// The files are still applied; only the cleanup of the unknown waits.
	if got, want := fake.state(), "gone gone.yaml /bin/adopted\nx a.yaml /bin/v1"; got != want {
		t.Errorf("workloads %q, want %q", got, want)
	}
	fake.mu.Lock()
	fake.failOwned = nil
	fake.mu.Unlock()
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fake.state(), "x a.yaml /bin/v1"; got != want {
		t.Errorf("workloads %q, want %q", got, want)
	}
	if ps := w.Problems(); len(ps) != 0 {
		t.Errorf("problems %v, want none", ps)
	}
}

func TestSyncGivesUpOnContext(t *testing.T) {
	w := newTestWatcher(t, t.TempDir(), newFakeApplier(nil))
	w.sem <- struct{}{} // a reconcile in progress
	defer func() { <-w.sem }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := w.Sync(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sync: %v, want %v", err, context.DeadlineExceeded)
	}
}

func TestRunOnce(t *testing.T) {
	w := newTestWatcher(t, filepath.Join(t.TempDir(), "missing"), newFakeApplier(nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "Run started", func() string {
		if w.started.Load() {
			return ""
		}
		return "not started"
	})
	if err := w.Run(ctx); err == nil {
		t.Error("second Run: no error")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// eventLog is a Publisher that keeps what it is told.
type eventLog struct{ events []status.Event }

func (l *eventLog) Publish(ev status.Event) error {
	l.events = append(l.events, ev)
	return nil
}

// TestFileProblemsForStatusAndEvents: a refused file is in FileProblems,
// and in an event of type file, until it is good again, which is an event
// too; a problem retried unchanged is told once.
func TestFileProblemsForStatusAndEvents(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", wl("x", "v1"))
	writeFile(t, dir, "b.yaml", "name: [")
	evs := &eventLog{}
	w, err := New(Config{Dir: dir, Applier: newFakeApplier(nil), Logger: zaptest.NewLogger(t), Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.FileProblems(); len(got) != 1 || got[0].File != "b.yaml" || got[0].Error == "" {
		t.Errorf("file problems %+v, want b.yaml's", got)
	}
	if len(evs.events) != 1 || evs.events[0].Type != status.EventFile || !strings.HasPrefix(evs.events[0].Message, "b.yaml: ") || evs.events[0].Time.IsZero() {
		t.Fatalf("events %+v, want one of b.yaml's problem", evs.events)
	}
	writeFile(t, dir, "b.yaml", wl("y", "v1"))
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.FileProblems(); len(got) != 0 {
		t.Errorf("file problems %+v once b.yaml is good", got)
	}
	if got := (*Watcher)(nil).FileProblems(); got != nil {
		t.Errorf("file problems of no watcher: %+v", got)
	}
	if len(evs.events) != 2 || evs.events[1].Message != "b.yaml: ok" {
		t.Errorf("events %+v, want b.yaml: ok last", evs.events)
	}
}
