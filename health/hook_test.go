package health

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/spec"
)

// hookLoop is a Hook on a loop of the test's own, with what it told.
type hookLoop struct {
	h        *Hook
	cmds     chan func()
	stop     chan struct{}
	verdicts chan string
	readies  chan struct{}
	statuses chan string
}

func newHookLoop(t *testing.T, cfg HookConfig) *hookLoop {
	t.Helper()
	l := &hookLoop{cmds: make(chan func()), stop: make(chan struct{}),
		verdicts: make(chan string, 8), readies: make(chan struct{}, 8), statuses: make(chan string, 8)}
	cfg.Post = func(f func()) {
		go func() {
			select {
			case l.cmds <- f:
			case <-l.stop:
			}
		}()
	}
	cfg.Verdict = func(ok bool, why error) {
		v := "healthy"
		if !ok {
			v = "unhealthy"
			if why != nil {
				v += ": " + why.Error()
			}
		}
		l.verdicts <- v
	}
	cfg.Ready = func() { l.readies <- struct{}{} }
	cfg.Status = func(msg string) { l.statuses <- msg }
	cfg.Refused = func(int32, int, int, bool) {}
	cfg.Warn = func(msg string, err error) { t.Errorf("%s: %v", msg, err) }
	l.h = NewHook(cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case f := <-l.cmds:
				f()
			case <-l.stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		l.on(l.h.Stop)
		close(l.stop)
		<-done
	})
	return l
}

// on runs f on the loop and waits for it.
func (l *hookLoop) on(f func()) {
	done := make(chan struct{})
	l.cmds <- func() { f(); close(done) }
	<-done
}

func (l *hookLoop) verdict(t *testing.T, want string) {
	t.Helper()
	select {
	case v := <-l.verdicts:
		if !strings.HasPrefix(v, want) {
			t.Errorf("verdict %q; want %q", v, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no verdict; want %q", want)
	}
}

// TestHookNotify: a run that tells its health on its notify socket is
// ready, and healthy, once it says READY=1; what it says of itself is
// told; STOPPING=1 makes it unhealthy; once stopped, the hook hears the
// run no more, and another run starts from nothing.
func TestHookNotify(t *testing.T) {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "notify")
	path := NotifyPath(dir, "w")
	l := newHookLoop(t, HookConfig{Workload: "w", NotifyDir: dir,
		Probe: func() (Probe, error) { return nil, errors.New("a told run has no probe") }})
	hs := &spec.Health{Notify: true}
	env := map[string]string{}
	l.on(func() {
		if err := l.h.Prepare(hs, env); err != nil {
			t.Fatal(err)
		}
		// This test's process is the run: the sender is of its session.
		l.h.SetPID(sid)
		l.h.Start(hs, time.Now())
	})
	if env["NOTIFY_SOCKET"] != path {
		t.Fatalf("the program is told %v", env)
	}
	say := func(msg string) {
		t.Helper()
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	say("STATUS=warming up")
	if s := <-l.statuses; s != "warming up" {
		t.Errorf("status %q", s)
	}
	say("READY=1")
	l.verdict(t, "healthy")
	<-l.readies
	var ready bool
	l.on(func() { ready = l.h.Ready() })
	if !ready {
		t.Error("the run's READY=1 is not kept")
	}
	say("STOPPING=1")
	l.verdict(t, "unhealthy: the program says it is stopping")

	l.on(l.h.Stop)
	l.on(func() { ready = l.h.Ready() })
	if ready {
		t.Error("a stopped run is still ready")
	}
	// The next run: adopted as ready, it is healthy at once, and says it
	// to a socket bound anew.
	l.on(func() {
		l.h.Adopted(true, nil)
		l.h.Start(hs, time.Now())
	})
	l.verdict(t, "healthy")
	say("STOPPING=1")
	l.verdict(t, "unhealthy")
}

// TestHookLog: a run whose line is its readiness is healthy once the line
// is in its log after where the run began, and not for an earlier run's.
func TestHookLog(t *testing.T) {
	book := logfile.NewBook(t.TempDir(), 0, 1)
	defer book.Close()
	log := book.Log("w")
	if err := log.Append([]byte("listening (an earlier run)\n")); err != nil {
		t.Fatal(err)
	}
	l := newHookLoop(t, HookConfig{Workload: "w", Log: func() *logfile.Log { return book.Log("w") }})
	hs := &spec.Health{Log: "^listening", Timeout: spec.Duration{Duration: time.Minute}}
	l.on(func() {
		if err := l.h.Prepare(hs, map[string]string{}); err != nil {
			t.Fatal(err)
		}
		l.h.SetPID(unix.Getpid())
		l.h.Start(hs, time.Now())
	})
	var from *int64
	l.on(func() { from = l.h.LogFrom() })
	if from == nil || *from == 0 {
		t.Fatalf("where the run began: %v", from)
	}
	select {
	case v := <-l.verdicts:
		t.Fatalf("a verdict %q before the run said anything", v)
	case <-time.After(300 * time.Millisecond):
	}
	if err := log.Append([]byte("listening on :8080\n")); err != nil {
		t.Fatal(err)
	}
	l.verdict(t, "healthy")
	<-l.readies
}

// TestSocketOwner: a run's notify socket is its user's, by name or uid,
// root's for none; a user the host does not know is an error retrying
// cannot fix, as the run's start would be.
func TestSocketOwner(t *testing.T) {
	for _, c := range []struct {
		user string
		uid  int
	}{{"", 0}, {"root", 0}, {"0", 0}} {
		if uid, err := socketOwner(c.user); err != nil || uid != c.uid {
			t.Errorf("socketOwner(%q) = %d, %v; want %d", c.user, uid, err, c.uid)
		}
	}
	if _, err := socketOwner("no-such-user-of-flyd"); !errors.Is(err, driver.ErrExec) {
		t.Fatalf("an unknown user: %v", err)
	}
	if p := NotifyPath("/run/flyd/notify", "shop.web"); p != "/run/flyd/notify/shop.web.sock" {
		t.Fatalf("NotifyPath: %s", p)
	}
}
