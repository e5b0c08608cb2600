package declarative

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// Every scenario runs twice: driven by Sync after each step, which checks the
// reconcile logic exactly, and driven by Run alone, which checks that
// fsnotify events on the real filesystem reach the same final state.

type env struct {
	dir  string
	w    *Watcher
	fake *fakeApplier
	ctx  context.Context
}

type step struct {
	name     string
	do       func(t *testing.T, e *env)
	state    string            // fakeApplier.state once settled
	problems map[string]string // file → a substring of its problem
	events   []string          // substrings OnProblem must have reported, in order
	check    func(t *testing.T, e *env)
}

type scenario struct {
	name       string
	owned      map[string]string // workloads owned by files before the watcher starts
	files      map[string]string // written before the watcher starts
	missingDir bool              // the directory and its parent do not exist at start
	steps      []step
}

func wl(name, version string) string {
	return fmt.Sprintf("name: %s\ncommand: [/bin/%s]\n", name, version)
}

func write(name, content string) func(*testing.T, *env) {
	return func(t *testing.T, e *env) { t.Helper(); writeFile(t, e.dir, name, content) }
}

func remove(name string) func(*testing.T, *env) {
	return func(t *testing.T, e *env) {
		t.Helper()
		if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func nothing(*testing.T, *env) {}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, dir, from, to string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		t.Fatal(err)
	}
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios {
		for _, mode := range []string{"sync", "watch"} {
			t.Run(sc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				runScenario(t, sc, mode == "watch")
			})
		}
	}
}

func runScenario(t *testing.T, sc scenario, watch bool) {
	root := t.TempDir()
	dir := filepath.Join(root, "workloads")
	if sc.missingDir {
		dir = filepath.Join(root, "etc", "workloads")
	} else if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range sc.files {
		writeFile(t, dir, name, content)
	}
	fake := newFakeApplier(sc.owned)
	var log problemLog
	w, err := New(Config{Dir: dir, Applier: fake, Logger: zaptest.NewLogger(t), Debounce: 20 * time.Millisecond, OnProblem: log.record})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{dir: dir, w: w, fake: fake, ctx: ctx}
	if watch {
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	} else {
		t.Cleanup(cancel)
	}

	for i, s := range sc.steps {
		s.do(t, e)
		if !watch {
			if err := w.Sync(ctx); err != nil {
				t.Fatalf("step %d (%s): Sync: %v", i, s.name, err)
			}
		}
		// Under Run, poll: the state settles after the debounce.
		eventually(t, fmt.Sprintf("step %d (%s)", i, s.name), func() string {
			return mismatch(s, fake, w, &log)
		})
		if s.check != nil {
			s.check(t, e)
		}
	}
}

// mismatch says how the settled state differs from what s wants, or "".
func mismatch(s step, fake *fakeApplier, w *Watcher, log *problemLog) string {
	if got := fake.state(); got != s.state {
		return fmt.Sprintf("workloads:\n%s\nwant:\n%s", got, s.state)
	}
	probs := w.Problems()
	var files []string
	for _, p := range probs {
		files = append(files, p.File)
		if want, ok := s.problems[p.File]; ok && !strings.Contains(p.Err.Error(), want) {
			return fmt.Sprintf("problem of %q is %q, want it to contain %q", p.File, p.Err, want)
		}
	}
	if len(files) != len(s.problems) || !slices.IsSortedFunc(probs, func(a, b Problem) int { return strings.Compare(a.File, b.File) }) {
		return fmt.Sprintf("problems in %q, want in %d files: %v", files, len(s.problems), s.problems)
	}
	for f := range s.problems {
		if !slices.Contains(files, f) {
			return fmt.Sprintf("no problem for %q; problems in %q", f, files)
		}
	}
	events := log.all()
	rest := events
	for _, want := range s.events {
		i := slices.IndexFunc(rest, func(ev string) bool { return strings.Contains(ev, want) })
		if i < 0 {
			return fmt.Sprintf("OnProblem events %q, want %q in order", events, s.events)
		}
		rest = rest[i+1:]
	}
	return ""
}

// eventually polls cond until it returns "" or a deadline passes; the
// deadline is generous, the usual wait is one debounce.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
