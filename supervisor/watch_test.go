package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/devwatch"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// watchEvents are the watch events of a workload since seq.
func watchEvents(s *Supervisor, name string, since uint64) []string {
	var out []string
	s.events.Replay(since, s.events.Last(), func(ev status.Event) bool {
		if ev.Type == status.EventWatch && ev.Workload == name {
			out = append(out, ev.Message)
		}
		return true
	})
	return out
}

// waitWatchEvent waits for a watch event of name since seq that holds
// want, and returns it.
func waitWatchEvent(t *testing.T, s *Supervisor, name string, since uint64, want string) string {
	t.Helper()
	var got string
	waitFor(t, "a watch event with "+want, func() bool {
		for _, m := range watchEvents(s, name, since) {
			if strings.Contains(m, want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// TestWatchRestarts: while watching, a burst of saves under the path is
// one restart, an ignored file none, a directory made later is watched
// with what it holds; turning watching off leaves the run alone and stops
// the watch; a removed workload leaves no inotify instance behind.
func TestWatchRestarts(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "pkg", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := testenv.InotifyInstances(t)

	sp := fakeSpec("web", "run")
	sp.Watch = []spec.Watch{{Path: src, Action: spec.WatchRestart, Ignore: []string{"*.log"}}}
	sp.Watching = true
	seq := s.events.Last()
	if _, err := s.Apply(ctx, sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "web", status.Running)
	if m := waitWatchEvent(t, s, "web", seq, "watching"); !strings.Contains(m, "watching 3 directories") {
		t.Errorf("armed: %q", m)
	}
	if n := testenv.InotifyInstances(t); n != base+1 {
		t.Errorf("%d inotify instances, want %d", n, base+1)
	}

	pid := func() int { v, _ := s.Get(ctx, "web"); return v.PID }
	first := pid()
	starts := d.startCount()
	seq = s.events.Last()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(src, "app.py"), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := waitWatchEvent(t, s, "web", seq, "restarted")
	if !strings.Contains(m, "app.py changed") {
		t.Errorf("event %q does not say what changed", m)
	}
	waitFor(t, "the new run", func() bool { return pid() != first && pid() != 0 })
	time.Sleep(2 * devwatch.Quiet)
	if n := d.startCount() - starts; n != 1 {
		t.Errorf("20 saves gave %d starts, want 1", n)
	}

	// Ignored, by the entry and by default: nothing.
	starts, seq = d.startCount(), s.events.Last()
	for _, f := range []string{"server.log", ".app.py.swp", "pkg/__pycache__"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * devwatch.Quiet)
	if n := d.startCount() - starts; n != 0 || len(watchEvents(s, "web", seq)) != 0 {
		t.Errorf("ignored files gave %d starts and events %q", n, watchEvents(s, "web", seq))
	}

	// A directory made now is watched, and what it holds counts.
	seq = s.events.Last()
	if err := os.MkdirAll(filepath.Join(src, "new", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitWatchEvent(t, s, "web", seq, "restarted")
	seq = s.events.Last()
	if err := os.WriteFile(filepath.Join(src, "new", "sub", "x.py"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := waitWatchEvent(t, s, "web", seq, "restarted"); !strings.Contains(m, "new/sub/x.py") {
		t.Errorf("event %q", m)
	}

	// Stopped by request: nothing done, and said.
	waitState(t, s, "web", status.Running)
	if _, err := s.Stop(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	seq = s.events.Last()
	if err := os.WriteFile(filepath.Join(src, "app.py"), []byte("stopped"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitWatchEvent(t, s, "web", seq, "nothing done: web is stopped")
	if _, err := s.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}

	// Watching off: the run goes on, the watch goes.
	running := waitState(t, s, "web", status.Running).PID
	off := sp.Clone()
	off.Watching = false
	seq = s.events.Last()
	if _, err := s.Apply(ctx, off, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	waitWatchEvent(t, s, "web", seq, "not watching any more")
	if pid() != running {
		t.Errorf("turning watching off replaced the run")
	}
	if v, _ := s.Get(ctx, "web"); v.Spec.Watching {
		t.Error("the spec still says watching")
	}
	waitFor(t, "the inotify instance to go", func() bool { return testenv.InotifyInstances(t) == base })
	if err := os.WriteFile(filepath.Join(src, "app.py"), []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * devwatch.Quiet)
	if pid() != running {
		t.Errorf("a change restarted a workload that is not watching")
	}

	// On again, then removed: no watch left.
	if _, err := s.Apply(ctx, sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch", func() bool { return testenv.InotifyInstances(t) == base+1 })
	if pid() != running {
		t.Errorf("turning watching on replaced the run")
	}
	if err := s.Remove(ctx, "web", RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := testenv.InotifyInstances(t); n != base {
		t.Errorf("%d inotify instances after the removal, want %d", n, base)
	}
}

// TestWatchExec: a command that fails keeps the run and says why, in an
// event and in the workload's log; one that succeeds restarts it.
func TestWatchExec(t *testing.T) {
	d := newFakeDriver()
	s := openFake(t, d)
	defer shut(s)
	ctx := context.Background()
	src := t.TempDir()
	flag := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sp := fakeSpec("api", "run")
	sp.Watch = []spec.Watch{{Path: src, Action: spec.WatchExec, Exec: []string{"/bin/sh", "-c", "if [ -e " + flag + " ]; then echo syntax error >&2; exit 2; fi"}}}
	sp.Watching = true
	seq := s.events.Last()
	if _, err := s.Apply(ctx, sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	first := waitState(t, s, "api", status.Running).PID
	waitWatchEvent(t, s, "api", seq, "watching")

	seq = s.events.Last()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := waitWatchEvent(t, s, "api", seq, "failed")
	if !strings.Contains(m, "exit status 2") || !strings.Contains(m, "syntax error") || !strings.Contains(m, "the last run goes on") {
		t.Errorf("event %q", m)
	}
	if v := waitState(t, s, "api", status.Running); v.PID != first {
		t.Errorf("a failed build replaced the run")
	}
	var log strings.Builder
	if err := s.Logs(ctx, "api", logfile.Query{Tail: -1}, writeLog(&log)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "flyd: watch: exec /bin/sh failed") {
		t.Errorf("log %q", log.String())
	}

	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	seq = s.events.Last()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("fixed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := waitWatchEvent(t, s, "api", seq, "done in"); !strings.Contains(m, "restarted") {
		t.Errorf("event %q", m)
	}
	if v := waitState(t, s, "api", status.Running); v.PID == first {
		t.Errorf("a good build did not replace the run")
	}
}

// TestWatchRefusedAtApply: what the daemon judges of the paths, naming
// the field.
func TestWatchRefusedAtApply(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := t.TempDir()
	for i := range devwatch.MaxDirs + 1 {
		if err := os.Mkdir(filepath.Join(big, "d"+itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		path, ignore string
		watching     bool
		field, want  string
	}{
		{path: "src", field: "watch[0].path", want: "relative"},
		{path: "src", watching: true, field: "watch[0].path", want: "relative"},
		{path: filepath.Join(dir, "nothing"), watching: true, field: "watch[0].path", want: "does not exist"},
		{path: filepath.Join(dir, "nothing")}, // not read until watching is on
		{path: fifo, watching: true, field: "watch[0].path", want: "neither a directory nor a file"},
		{path: big, watching: true, field: "watch[0].path", want: "over 4096 directories"},
		{path: big, ignore: "d1*", watching: true}, // ignored directories are not watched
	} {
		sp := fakeSpec("w", "run")
		sp.Watch = []spec.Watch{{Path: tt.path, Action: spec.WatchRestart}}
		if tt.ignore != "" {
			sp.Watch[0].Ignore = []string{tt.ignore}
		}
		sp.Watching = tt.watching
		_, err := s.Apply(context.Background(), sp, ApplyOptions{})
		var fe *spec.FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s (watching %v): %v", tt.path, tt.watching, err)
		case tt.field == "":
		case !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Msg, tt.want):
			t.Errorf("%s (watching %v): %v; want %s: …%s…", tt.path, tt.watching, err, tt.field, tt.want)
		}
		_ = s.Remove(context.Background(), "w", RemoveOptions{})
	}
}

// TestWatchKeptAcrossDaemonRestart: watching is in the spec, so the next
// daemon watches again, with no record of its own.
func TestWatchKeptAcrossDaemonRestart(t *testing.T) {
	d := newFakeDriver()
	dirs := t.TempDir()
	open := func() *Supervisor {
		s, err := newSupervisor(Config{StateDir: dirs + "/state", RunDir: dirs + "/run", Drivers: []driver.Driver{d}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	src := t.TempDir()
	s := open()
	sp := fakeSpec("web", "run")
	sp.Watch = []spec.Watch{{Path: src, Action: spec.WatchRestart}}
	sp.Watching = true
	if _, err := s.Apply(ctx, sp, ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	first := waitState(t, s, "web", status.Running).PID
	shut(s) // the run is left to the next daemon

	s = open()
	defer shut(s)
	if v := waitState(t, s, "web", status.Running); v.PID != first {
		t.Fatalf("the run was not adopted: pid %d, was %d", v.PID, first)
	}
	waitFor(t, "the next daemon's watch", func() bool {
		n := 0
		for _, m := range watchEvents(s, "web", 0) { // both daemons' events
			if strings.Contains(m, "watching 1 directory") {
				n++
			}
		}
		return n == 2
	})
	seq := s.events.Last()
	if err := os.WriteFile(filepath.Join(src, "app.py"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitWatchEvent(t, s, "web", seq, "restarted")
	if v := waitState(t, s, "web", status.Running); v.PID == first {
		t.Error("the edit did not replace the run")
	}
	if err := s.Remove(ctx, "web", RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
}
