package devwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeActions is a workload as a watch sees it: what was asked of it.
type fakeActions struct {
	mu       sync.Mutex
	said     []string
	logged   []string
	restarts int
	// root is the directory Root opens; "" when no container runs.
	root string
	// cmdErr is what Command's command returns.
	cmdErr error
	// gone has every action return ErrGone.
	gone bool
}

func (a *fakeActions) Restart(context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gone {
		return "", ErrGone
	}
	a.restarts++
	return "restarted", nil
}

func (a *fakeActions) Command(_ context.Context, argv []string) (func(context.Context) error, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.cmdErr
	return func(context.Context) error { return err }, "", nil
}

func (a *fakeActions) Log(_ context.Context, line string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.logged = append(a.logged, line)
}

func (a *fakeActions) Root(context.Context) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.root == "" {
		return -1, nil
	}
	return unix.Open(a.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

func (a *fakeActions) Say(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.said = append(a.said, msg)
}

// mark is where what the watch says stands now.
func (a *fakeActions) mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.said)
}

func (a *fakeActions) saidSince(n int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.said[n:]...)
}

func (a *fakeActions) restarted() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.restarts
}

// waitSaid waits for a message since mark that holds want, and returns it.
func waitSaid(t *testing.T, a *fakeActions, mark int, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range a.saidSince(mark) {
			if strings.Contains(m, want) {
				return m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing said with %q; said %q", want, a.saidSince(mark))
	return ""
}

func write(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestArmRestarts: a burst of saves is one restart, an ignored file none,
// a directory made later is watched with what it holds, and Stop leaves no
// inotify instance behind.
func TestArmRestarts(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "pkg", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := testenv.InotifyInstances(t)
	a := &fakeActions{}
	set := Arm(context.Background(), []spec.Watch{{Path: src, Action: spec.WatchRestart, Ignore: []string{"*.log"}}}, a, zap.NewNop())
	defer set.Stop()
	if m := waitSaid(t, a, 0, "watching"); !strings.Contains(m, "watching 3 directories (restart)") {
		t.Errorf("armed: %q", m)
	}
	if n := testenv.InotifyInstances(t); n != base+1 {
		t.Errorf("%d inotify instances, want %d", n, base+1)
	}

	mark := a.mark()
	for i := range 20 {
		write(t, filepath.Join(src, "app.py"), string(rune('a'+i)))
		time.Sleep(10 * time.Millisecond)
	}
	if m := waitSaid(t, a, mark, "restarted"); m != "watch[0] "+src+": app.py changed: restarted" {
		t.Errorf("said %q", m)
	}
	time.Sleep(2 * Quiet)
	if n := a.restarted(); n != 1 {
		t.Errorf("20 saves gave %d restarts, want 1", n)
	}

	mark = a.mark()
	for _, f := range []string{"server.log", ".app.py.swp", "pkg/__pycache__"} {
		write(t, filepath.Join(src, f), "x")
	}
	time.Sleep(3 * Quiet)
	if n := a.restarted(); n != 1 || len(a.saidSince(mark)) != 0 {
		t.Errorf("ignored files gave %d restarts and %q", n-1, a.saidSince(mark))
	}

	mark = a.mark()
	if err := os.MkdirAll(filepath.Join(src, "new", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitSaid(t, a, mark, "restarted")
	mark = a.mark()
	write(t, filepath.Join(src, "new", "sub", "x.py"), "x")
	if m := waitSaid(t, a, mark, "restarted"); !strings.Contains(m, "new/sub/x.py") {
		t.Errorf("said %q", m)
	}

	set.Stop()
	if n := testenv.InotifyInstances(t); n != base {
		t.Errorf("%d inotify instances after Stop, want %d", n, base)
	}
	if n := set.dirs.Load(); n != 0 {
		t.Errorf("%d directories still counted after Stop", n)
	}
}

// TestArmInclude: with include globs, a change counts only when one
// matches it (and no ignore glob does); a directory made later is watched
// all the same, its included files counted; the entry's debounce paces
// its bursts in place of the default.
func TestArmInclude(t *testing.T) {
	src := t.TempDir()
	a := &fakeActions{}
	debounce := 50 * time.Millisecond
	set := Arm(context.Background(), []spec.Watch{{Path: src, Action: spec.WatchRestart,
		Include: []string{"*.go", "go.mod"}, Ignore: []string{"*_gen.go"}, Debounce: spec.Duration{Duration: debounce}}}, a, zap.NewNop())
	defer set.Stop()
	waitSaid(t, a, 0, "watching")

	mark := a.mark()
	for _, f := range []string{"README.md", "notes.txt", "api_gen.go"} {
		write(t, filepath.Join(src, f), "x")
	}
	time.Sleep(10 * debounce)
	if got := a.saidSince(mark); len(got) != 0 || a.restarted() != 0 {
		t.Fatalf("changes no include glob matches (or ignored) restarted: %q", got)
	}
	start := time.Now()
	write(t, filepath.Join(src, "main.go"), "x")
	if m := waitSaid(t, a, mark, "restarted"); m != "watch[0] "+src+": main.go changed: restarted" {
		t.Errorf("said %q", m)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("acted %s after the change; its debounce is %s", took, debounce)
	}
	mark = a.mark()
	if err := os.MkdirAll(filepath.Join(src, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * debounce)
	if got := a.saidSince(mark); len(got) != 0 {
		t.Errorf("an empty directory counted: %q", got)
	}
	write(t, filepath.Join(src, "pkg", "x.go"), "x")
	if m := waitSaid(t, a, mark, "restarted"); !strings.Contains(m, "pkg/x.go") {
		t.Errorf("said %q", m)
	}
}

// TestArmFile: an entry on one file acts on that file alone, replaced by
// rename as an editor saves it.
func TestArmFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	write(t, conf, "a")
	a := &fakeActions{}
	set := Arm(context.Background(), []spec.Watch{{Path: conf}}, a, zap.NewNop())
	defer set.Stop()
	waitSaid(t, a, 0, "watching the file")

	mark := a.mark()
	write(t, filepath.Join(dir, "other"), "x")
	time.Sleep(3 * Quiet)
	if got := a.saidSince(mark); len(got) != 0 {
		t.Errorf("a file beside it: %q", got)
	}
	write(t, conf+".tmp", "b")
	if err := os.Rename(conf+".tmp", conf); err != nil {
		t.Fatal(err)
	}
	waitSaid(t, a, mark, "app.conf changed: restarted")
}

// TestArmExec: a command that fails restarts nothing and says why, in the
// workload's log too; one that succeeds restarts.
func TestArmExec(t *testing.T) {
	src := t.TempDir()
	a := &fakeActions{cmdErr: errors.New("exit status 2: syntax error")}
	set := Arm(context.Background(), []spec.Watch{{Path: src, Action: spec.WatchExec, Exec: []string{"make"}}}, a, zap.NewNop())
	defer set.Stop()
	waitSaid(t, a, 0, "watching")

	mark := a.mark()
	write(t, filepath.Join(src, "main.go"), "broken")
	m := waitSaid(t, a, mark, "failed")
	if !strings.Contains(m, "exec make failed after") || !strings.Contains(m, "syntax error") || !strings.Contains(m, "the last run goes on") {
		t.Errorf("said %q", m)
	}
	a.mu.Lock()
	logged, restarts := a.logged, a.restarts
	a.cmdErr = nil
	a.mu.Unlock()
	if restarts != 0 || len(logged) != 1 || !strings.HasPrefix(logged[0], "flyd: watch: exec make failed") {
		t.Errorf("%d restarts, logged %q", restarts, logged)
	}

	mark = a.mark()
	write(t, filepath.Join(src, "main.go"), "fixed")
	if m := waitSaid(t, a, mark, "done in"); !strings.HasSuffix(m, "; restarted") {
		t.Errorf("said %q", m)
	}
}

// TestArmSync: what changed is copied into the container's root at the
// target; with no container running, nothing is, and that is said.
func TestArmSync(t *testing.T) {
	src, root := t.TempDir(), t.TempDir()
	a := &fakeActions{root: root}
	set := Arm(context.Background(), []spec.Watch{{Path: src, Action: spec.WatchSync, Target: "/app"}}, a, zap.NewNop())
	defer set.Stop()
	waitSaid(t, a, 0, "watching")

	mark := a.mark()
	write(t, filepath.Join(src, "lib", "a.py"), "A")
	if m := waitSaid(t, a, mark, "synced"); !strings.Contains(m, "1 copied") || !strings.HasSuffix(m, "into /app") {
		t.Errorf("said %q", m)
	}
	if b, err := os.ReadFile(filepath.Join(root, "app", "lib", "a.py")); err != nil || string(b) != "A" {
		t.Errorf("a.py in the root: %q %v", b, err)
	}

	a.mu.Lock()
	a.root = ""
	a.mu.Unlock()
	mark = a.mark()
	write(t, filepath.Join(src, "lib", "a.py"), "B")
	waitSaid(t, a, mark, "nothing done: no container runs")
}

// TestArmSaysWhatIsNotWatched: an entry that cannot be watched is said,
// and the others are watched; an action whose watch is gone says nothing.
func TestArmSaysWhatIsNotWatched(t *testing.T) {
	src := t.TempDir()
	a := &fakeActions{gone: true}
	set := Arm(context.Background(), []spec.Watch{{Path: filepath.Join(src, "nothing")}, {Path: src}}, a, zap.NewNop())
	defer set.Stop()
	waitSaid(t, a, 0, "watch[0] "+filepath.Join(src, "nothing")+": not watched")
	waitSaid(t, a, 0, "watch[1] "+src+": watching 1 directory")

	mark := a.mark()
	write(t, filepath.Join(src, "a.py"), "x")
	time.Sleep(3 * Quiet)
	if got := a.saidSince(mark); len(got) != 0 {
		t.Errorf("a watch gone said %q", got)
	}
}

// TestCheck: what is judged of the paths at apply, naming the field.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := t.TempDir()
	for i := range MaxDirs + 1 {
		if err := os.Mkdir(filepath.Join(big, "d"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		path, ignore string
		watching     bool
		want         string // "": accepted
	}{
		{path: "src", want: "relative"},
		{path: filepath.Join(dir, "nothing"), watching: true, want: "does not exist"},
		{path: filepath.Join(dir, "nothing")}, // not read until watching is on
		{path: fifo, watching: true, want: "neither a directory nor a file"},
		{path: big, watching: true, want: "over 4096 directories"},
		{path: big, ignore: "d*", watching: true}, // ignored directories are not watched
	} {
		e := spec.Watch{Path: tt.path, Action: spec.WatchRestart}
		if tt.ignore != "" {
			e.Ignore = []string{tt.ignore}
		}
		err := Check([]spec.Watch{e}, tt.watching)
		var fe *spec.FieldError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s (watching %v): %v", tt.path, tt.watching, err)
		case tt.want == "":
		case !errors.As(err, &fe) || fe.Field != "watch[0].path" || !strings.Contains(fe.Msg, tt.want):
			t.Errorf("%s (watching %v): %v; want watch[0].path: …%s…", tt.path, tt.watching, err, tt.want)
		}
	}
}

// TestFollower: a watch is armed once for a spec that watches, armed anew
// for another, ended for one that does not watch; only the armed one's
// actions are its own, and Stop leaves no inotify instance behind.
func TestFollower(t *testing.T) {
	src := t.TempDir()
	base := testenv.InotifyInstances(t)
	watching := &spec.Workload{Name: "web", Watching: true, Watch: []spec.Watch{{Path: src, Action: spec.WatchRestart}}}
	quiet := &spec.Workload{Name: "web", Watch: watching.Watch}
	var f Follower
	if f.Stale(quiet) || !f.Stale(watching) {
		t.Fatal("the zero follower: stale for a spec that does not watch, or not for one that does")
	}
	var made []*fakeActions
	act := func() Actions {
		a := &fakeActions{}
		made = append(made, a)
		return a
	}
	if f.Follow(context.Background(), watching, act, zap.NewNop()) || len(made) != 1 || !f.Armed(made[0]) {
		t.Fatalf("armed: %d actions made", len(made))
	}
	waitSaid(t, made[0], 0, "watching")
	if f.Stale(watching) {
		t.Fatal("stale for the spec armed for")
	}
	again := *watching
	if !f.Stale(&again) || f.Follow(context.Background(), &again, act, zap.NewNop()) || len(made) != 2 || f.Armed(made[0]) || !f.Armed(made[1]) {
		t.Fatalf("another spec: %d actions made", len(made))
	}
	if n := testenv.InotifyInstances(t); n != base+1 {
		t.Errorf("%d inotify instances, want %d: the first watch's is left", n, base+1)
	}
	if !f.Follow(context.Background(), quiet, act, zap.NewNop()) || len(made) != 2 || f.Armed(made[1]) || f.Stale(quiet) {
		t.Fatal("a spec that stops watching: no end said, or a watch armed")
	}
	if f.Follow(context.Background(), quiet, act, zap.NewNop()) {
		t.Fatal("an end said twice")
	}
	f.Follow(context.Background(), watching, act, zap.NewNop())
	f.Stop()
	if n := testenv.InotifyInstances(t); n != base {
		t.Errorf("%d inotify instances after Stop, want %d", n, base)
	}
}
