package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

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
		{"a.b", true}, // a project's network
		{"a.b.c", false},
		{".b", false},
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
		name      string
		nameOf    func(i int) string
		instances int // Networks values over one directory, as two daemons would have
		distinct  int
	}{
		{"same name", func(int) string { return "shared" }, 1, 1},
		{"different names", func(i int) string { return fmt.Sprintf("net-%d", i) }, 1, 10},
		{"same name, two instances", func(int) string { return "shared" }, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := newTestNetworks(t)
			all := []*Networks{first}
			for range tt.instances - 1 {
				other, err := NewNetworks(first.Dir())
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, other)
			}
			ids := make([]uint64, 10)
			errs := make([]error, 10)
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() {
					nw, err := all[i%len(all)].Ensure(tt.nameOf(i))
					if err != nil {
						errs[i] = err
						return
					}
					var st unix.Stat_t
					errs[i] = unix.Stat(nw.Path, &st)
					ids[i] = st.Ino
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if got := len(slices.Compact(slices.Sorted(slices.Values(ids)))); got != tt.distinct {
				t.Fatalf("%d distinct namespaces, want %d: %v", got, tt.distinct, ids)
			}
			if got := len(mountsUnder(t, first.Dir())); got != tt.distinct {
				t.Fatalf("%d mounts under the directory, want %d", got, tt.distinct)
			}
		})
	}
}

// A restarted daemon finds its networks, and the workloads in them, intact.
func TestReopenDirectory(t *testing.T) {
	before := newTestNetworks(t)
	nw, err := before.Ensure("kept")
	if err != nil {
		t.Fatal(err)
	}
	after, err := NewNetworks(before.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if names, err := after.List(); err != nil || !slices.Equal(names, []string{"kept"}) {
		t.Fatalf("List after reopening = %v, %v", names, err)
	}
	again, err := after.Ensure("kept")
	if err != nil {
		t.Fatal(err)
	}
	if nsID(t, again.Path) != nsID(t, nw.Path) {
		t.Fatal("reopening the directory replaced an existing namespace")
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

// Every operation closes what it opens: a daemon calls these for months.
func TestNoDescriptorLeak(t *testing.T) {
	n := newTestNetworks(t)
	openFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := openFDs()
	for i := range 20 {
		name := fmt.Sprintf("fd-%d", i%3)
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Open(name); err != nil {
			t.Fatal(err)
		}
		if err := nw.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := n.List(); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Open("absent"); err == nil {
			t.Fatal("Open of an absent network succeeded")
		}
		if i%2 == 0 {
			if err := n.Delete(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := openFDs(); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}
