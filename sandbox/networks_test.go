package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name  string
		valid bool
	}{
		{"a", true},
		{"web", true},
		{"back-end", true},
		{"0", true},
		{"host2", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"host", false},
		{"-a", false},
		{"a-", false},
		{"Web", false},
		{"a_b", false},
		{"a.b", false},
		{"a/b", false},
		{"..", false},
		{".lock", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			err := ValidateName(tt.name)
			if tt.valid && err != nil {
				t.Fatalf("ValidateName: %v", err)
			}
			if !tt.valid && !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("ValidateName = %v, want an error wrapping errdefs.ErrInvalid", err)
			}
		})
	}
}

func TestInvalidNamesRefused(t *testing.T) {
	n := newTestNetworks(t)
	ops := []struct {
		op   string
		call func(string) error
	}{
		{"Ensure", func(s string) error { _, err := n.Ensure(s); return err }},
		{"Open", func(s string) error { _, err := n.Open(s); return err }},
		{"Delete", n.Delete},
	}
	for _, op := range ops {
		for _, name := range []string{"host", "", "../escape", "Bad"} {
			t.Run(op.op+"/"+name, func(t *testing.T) {
				if err := op.call(name); !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("%s(%q) = %v, want errdefs.ErrInvalid", op.op, name, err)
				}
			})
		}
	}
	if entries, _ := os.ReadDir(n.Dir()); len(entries) != 1 { // only the lock file
		t.Fatalf("refused names left files behind: %v", entries)
	}
}

// pingPong connects to ln from the current thread and checks that bytes
// travel both ways.
func pingPong(ln net.Listener) error {
	c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	// The connection is already queued, unless it went to another
	// namespace's listener: then fail rather than hang.
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
	s, err := ln.Accept()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("read %q, want ping", buf)
	}
	return nil
}

func TestEnsureLoopbackUp(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			err := nw.Do(func() error {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return err
				}
				defer ln.Close()
				return pingPong(ln)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// listenIn opens a listener inside nw; the socket stays in nw's namespace
// after Do returns.
func listenIn(t *testing.T, nw *Network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := nw.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, nw.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// accepts reports whether a connection is waiting on ln.
func accepts(ln net.Listener) bool {
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	c, err := ln.Accept()
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestNetworksIsolatePorts(t *testing.T) {
	n := newTestNetworks(t)
	// Find a port free on the host; the namespaces start empty anyway.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	listeners := map[string]net.Listener{}
	for _, name := range []string{"alpha", "beta"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		listeners[name] = listenIn(t, nw, addr)
	}

	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("host reached %s, which only isolated networks listen on", addr)
	}

	host, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("host cannot listen on %s next to the networks: %v", addr, err)
	}
	defer host.Close()

	tests := []struct {
		from string // "" is the host
		want string
	}{
		{"", "host"},
		{"alpha", "alpha"},
		{"beta", "beta"},
	}
	for _, tt := range tests {
		t.Run("from "+tt.want, func(t *testing.T) {
			dial := func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
				}
				return err
			}
			if tt.from != "" {
				nw, err := n.Open(tt.from)
				if err != nil {
					t.Fatal(err)
				}
				onHost := dial
				dial = func() error { return nw.Do(onHost) }
			}
			if err := dial(); err != nil {
				t.Fatal(err)
			}
			all := map[string]net.Listener{"host": host, "alpha": listeners["alpha"], "beta": listeners["beta"]}
			for name, ln := range all {
				if got := accepts(ln); got != (name == tt.want) {
					t.Errorf("listener in %s accepted = %v", name, got)
				}
			}
		})
	}
}

func TestEnsureIdempotent(t *testing.T) {
	n := newTestNetworks(t)
	first, err := n.Ensure("same")
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.Ensure("same")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := nsID(t, first.Path), nsID(t, again.Path); a != b {
		t.Fatalf("second Ensure made a new namespace: %s then %s", a, b)
	}
}

func TestEnsureConcurrent(t *testing.T) {
	tests := []struct {
		name     string
		nameOf   func(i int) string
		distinct int
	}{
		{"same name", func(int) string { return "shared" }, 1},
		{"different names", func(i int) string { return fmt.Sprintf("net-%d", i) }, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNetworks(t)
			ids := make([]string, 10)
			errs := make([]error, 10)
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() {
					nw, err := n.Ensure(tt.nameOf(i))
					if err != nil {
						errs[i] = err
						return
					}
					ids[i] = nsID(t, nw.Path)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if got := len(slices.Compact(slices.Sorted(slices.Values(ids)))); got != tt.distinct {
				t.Fatalf("%d distinct namespaces, want %d: %v", got, tt.distinct, ids)
			}
			if got := len(mountsUnder(t, n.Dir())); got != tt.distinct {
				t.Fatalf("%d mounts under the directory, want %d", got, tt.distinct)
			}
		})
	}
}

func TestList(t *testing.T) {
	n := newTestNetworks(t)
	if got, err := n.List(); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("List of an empty directory = %#v, %v; want an empty list", got, err)
	}
	for _, name := range []string{"charlie", "alpha", "bravo"} {
		if _, err := n.Ensure(name); err != nil {
			t.Fatal(err)
		}
	}
	// Neither a leftover file nor a stranger is a network.
	for _, name := range []string{"delta", "Not-A-Name"} {
		if err := os.WriteFile(filepath.Join(n.Dir(), name), nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	got, err := n.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "bravo", "charlie"}; !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
}

func TestOpen(t *testing.T) {
	n := newTestNetworks(t)
	made, err := n.Ensure("exists")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.Dir(), "leftover"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		wantErr error
	}{
		{"exists", nil},
		{"missing", errdefs.ErrNotFound},
		{"leftover", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw, err := n.Open(tt.name)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Open(%q) = %v, want %v", tt.name, err, tt.wantErr)
			}
			if err == nil && (nw.Name != made.Name || nw.Path != made.Path) {
				t.Fatalf("Open = %+v, Ensure gave %+v", nw, made)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("doomed")
	if err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, n.Dir()); !slices.Equal(got, []string{nw.Path}) {
		t.Fatalf("mounts = %v, want just %s", got, nw.Path)
	}
	if err := n.Delete("doomed"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(nw.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("namespace file still there: %v", err)
	}
	if got := mountsUnder(t, n.Dir()); len(got) != 0 {
		t.Fatalf("mounts left: %v", got)
	}
	if _, err := n.Open("doomed"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Open after Delete = %v, want ErrNotFound", err)
	}
	if err := nw.Do(func() error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Do after Delete = %v, want ErrNotFound", err)
	}
	for _, name := range []string{"doomed", "never-made"} {
		if err := n.Delete(name); err != nil {
			t.Fatalf("Delete(%q) of a missing network = %v", name, err)
		}
	}
}

// Delete only removes the name: code already inside keeps a working
// namespace, as a process inside would.
func TestDeleteWhileInside(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("busy")
	if err != nil {
		t.Fatal(err)
	}
	err = nw.Do(func() error {
		if err := n.Delete("busy"); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		return pingPong(ln)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, n.Dir()); len(got) != 0 {
		t.Fatalf("mounts left: %v", got)
	}
}

func TestStaleFileRecreated(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		data string
	}{
		{"empty leftover", 0o444, ""},
		{"writable leftover", 0o644, ""},
		{"leftover with bytes", 0o600, "junk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNetworks(t)
			path := filepath.Join(n.Dir(), "stale")
			if err := os.WriteFile(path, []byte(tt.data), tt.mode); err != nil {
				t.Fatal(err)
			}
			nw, err := n.Ensure("stale")
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := isNamespace(nw.Path); !ok || err != nil {
				t.Fatalf("Ensure left %s unmounted (%v)", nw.Path, err)
			}
			err = nw.Do(func() error {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				defer ln.Close()
				return pingPong(ln)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNewNetworksSweepsLeftovers(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "run", "networks") // also checks creation
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name, data string
		kept       bool
	}{
		{"crashed", "", false},
		{"not-ours", "data", true},
		{"Not_A_Name", "", true},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewNetworks(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if kept := err == nil; kept != f.kept {
			t.Errorf("%s kept = %v, want %v", f.name, kept, f.kept)
		}
	}
}

func TestNewNetworksCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	n, err := NewNetworks(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !info.IsDir() || info.Mode().Perm() != 0o755 {
		t.Fatalf("directory mode %v, want drwxr-xr-x", info.Mode())
	}
}

// Daemons with different run directories must never share a namespace.
func TestDirectoriesDoNotCollide(t *testing.T) {
	a, b := newTestNetworks(t), newTestNetworks(t)
	na, err := a.Ensure("app")
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.Ensure("app")
	if err != nil {
		t.Fatal(err)
	}
	if nsID(t, na.Path) == nsID(t, nb.Path) {
		t.Fatal("two directories share one namespace")
	}
	if err := a.Delete("app"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open("app"); err != nil {
		t.Fatalf("deleting in one directory removed the other's network: %v", err)
	}
}
