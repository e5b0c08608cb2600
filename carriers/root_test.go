package carriers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoot: the root reaches a run's directory and lists nothing to
// others; each run's directory is new; a sweep keeps those of the runs
// that live on and removes the rest.
func TestRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "carriers")
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("the root: %v, %v", fi, err)
	}
	a, b := r.Dir("shop.web"), r.Dir("shop.web")
	if a == b || filepath.Dir(a) != dir || !strings.HasPrefix(filepath.Base(a), "shop.web.") {
		t.Fatalf("run directories %s and %s", a, b)
	}
	gone := r.Dir("gone")
	for _, d := range []string{a, b, gone} {
		if _, err := Write(d, os.Getuid(), os.Getgid(), []File{{Key: "K", Value: "v"}}); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	r.Sweep([]string{a, filepath.Join("/elsewhere", filepath.Base(b))}, func(d string, err error) { warned = append(warned, d) })
	for d, want := range map[string]bool{a: true, b: true, gone: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s there after the sweep: %v; want %v", d, err == nil, want)
		}
	}
	if len(warned) != 0 {
		t.Fatalf("warned of %v", warned)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRoot(filepath.Join(file, "carriers")); err == nil {
		t.Fatal("a root under a file was made")
	}
}
