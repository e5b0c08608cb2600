package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// requireThreadsIn fails unless every thread of the process is in ns. A
// thread discarded by the runtime may take a moment to exit, so it retries.
func requireThreadsIn(t *testing.T, ns string) {
	t.Helper()
	var strays map[string]string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		strays = map[string]string{}
		for tid, link := range taskNamespaces(t) {
			if link != ns {
				strays[tid] = link
			}
		}
		if len(strays) == 0 {
			return
		}
	}
	t.Fatalf("threads outside %s: %v", ns, strays)
}

func TestDoThreadHygiene(t *testing.T) {
	n := newTestNetworks(t)
	host := hostNS
	var nets []*Network
	for _, name := range []string{"one", "two", "three"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		nets = append(nets, nw)
	}
	want := map[*Network]string{}
	for _, nw := range nets {
		want[nw] = nsID(t, nw.Path)
	}

	const goroutines, calls = 20, 10
	errs := make(chan error, 2*goroutines*calls) // a result and a check per call
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for c := range calls {
				nw := nets[(g+c)%len(nets)]
				errs <- nw.Do(func() error {
					got, err := threadNS()
					if err == nil && got != want[nw] {
						err = fmt.Errorf("inside %s the thread is in %s, want %s", nw.Name, got, want[nw])
					}
					return err
				})
				// Between calls, this goroutine's thread must be home.
				if got, err := threadNS(); err != nil || got != host {
					errs <- fmt.Errorf("after Do the caller's thread is in %s (%v)", got, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	requireThreadsIn(t, host)
	// And as a goroutine sees it: wherever the scheduler puts them, many
	// goroutines all find themselves at home.
	var bad sync.Map
	for range 200 {
		wg.Go(func() {
			runtime.Gosched()
			if got, err := threadNS(); err != nil || got != host {
				bad.Store(got, err)
			}
		})
	}
	wg.Wait()
	bad.Range(func(k, v any) bool {
		t.Errorf("a goroutine ran in %v (%v)", k, v)
		return true
	})
}

func TestDoOutcome(t *testing.T) {
	n := newTestNetworks(t)
	host := hostNS
	nw, err := n.Ensure("outcome")
	if err != nil {
		t.Fatal(err)
	}
	sentinel := errors.New("sentinel")
	tests := []struct {
		name      string
		fn        func() error
		wantErr   error // checked with errors.Is; nil means success
		wantPanic string
	}{
		{"success", func() error { return nil }, nil, ""},
		{"error passes through", func() error { return fmt.Errorf("wrapped: %w", sentinel) }, sentinel, ""},
		{"panic re-raised in caller", func() error { panic("boom") }, nil, "boom"},
		{"panic with error keeps it", func() error { panic(sentinel) }, nil, "sentinel"},
		{"Goexit is not success", func() error { runtime.Goexit(); return nil }, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recovered any
			var err error
			func() {
				defer func() { recovered = recover() }()
				err = nw.Do(tt.fn)
			}()
			switch {
			case tt.wantPanic != "":
				if recovered == nil || !strings.Contains(fmt.Sprint(recovered), tt.wantPanic) {
					t.Fatalf("recovered %v, want a panic mentioning %q", recovered, tt.wantPanic)
				}
				if e, ok := recovered.(error); ok && tt.wantPanic == "sentinel" && !errors.Is(e, sentinel) {
					t.Fatalf("re-raised panic %v does not wrap the original error", e)
				}
			case recovered != nil:
				t.Fatalf("unexpected panic: %v", recovered)
			case tt.name == "Goexit is not success":
				if err == nil {
					t.Fatal("Do returned nil after fn called runtime.Goexit")
				}
			case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil):
				t.Fatalf("Do = %v, want %v", err, tt.wantErr)
			}
			requireThreadsIn(t, host)
		})
	}
}

func TestDoMissingNetwork(t *testing.T) {
	n := newTestNetworks(t)
	nw := &Network{Name: "ghost", Path: n.Dir() + "/ghost"}
	called := false
	err := nw.Do(func() error { called = true; return nil })
	if !errors.Is(err, errdefs.ErrNotFound) || called {
		t.Fatalf("Do on a missing network = %v (fn called: %v), want ErrNotFound", err, called)
	}
}

// A child started inside Do is born in the namespace and stays there.
func TestDoStartsChildInNamespace(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("children")
	if err != nil {
		t.Fatal(err)
	}
	id := nsID(t, nw.Path)
	tests := []struct {
		name  string
		argv  []string
		check func(out string) error
	}{
		{"readlink", []string{"readlink", "/proc/self/ns/net"}, func(out string) error {
			if strings.TrimSpace(out) != id {
				return fmt.Errorf("child in %q, want %s", out, id)
			}
			return nil
		}},
		{"only loopback, up", []string{"ip", "-o", "link", "show"}, func(out string) error {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], " lo: ") || !strings.Contains(lines[0], ",UP") {
				return fmt.Errorf("child sees links %q, want lo alone and up", out)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, err := exec.LookPath(tt.argv[0])
			if err != nil {
				path = "/usr/sbin/" + tt.argv[0] // root's PATH may lack sbin
			}
			var out strings.Builder
			cmd := exec.Command(path, tt.argv[1:]...)
			cmd.Stdout = &out
			// Start inside, Wait outside: the namespace is fixed at birth.
			if err := nw.Do(cmd.Start); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := tt.check(out.String()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEnter(t *testing.T) {
	n := newTestNetworks(t)
	host := hostNS
	nw, err := n.Ensure("entered")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	goOffMainThread(func() {
		// Enter never unlocks: when this goroutine returns, the runtime
		// discards its thread, as it will for a process that execs instead.
		if err := nw.Enter(); err != nil {
			got <- err.Error()
			return
		}
		ns, err := threadNS()
		if err != nil {
			ns = err.Error()
		}
		got <- ns
	})
	if ns, want := <-got, nsID(t, nw.Path); ns != want {
		t.Fatalf("after Enter the thread is in %s, want %s", ns, want)
	}
	requireThreadsIn(t, host)
}

// goOffMainThread runs fn on a new goroutine locked to a thread other than
// the main one, which the runtime could only park, not discard, if fn left
// it in a namespace.
func goOffMainThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == pid {
			done := make(chan struct{})
			goOffMainThread(func() { defer close(done); fn() })
			<-done
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
}

// The main thread's namespace is the daemon's namespace as the rest of the
// system reads it (/proc/PID/ns/net, nsenter -t PID); Do must never lend
// the main thread to a network, even for a moment.
func TestDoNeverUsesMainThread(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("main")
	if err != nil {
		t.Fatal(err)
	}
	procNS := fmt.Sprintf("/proc/%d/ns/net", pid)
	neverOnMainThread(t, "a network", 500, nw.Do, func() bool {
		link, err := os.Readlink(procNS)
		return err == nil && link != hostNS
	})
}
