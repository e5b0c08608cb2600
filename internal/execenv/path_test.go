package execenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

// TestLookPath: the first regular executable of the name in an absolute
// directory of env's PATH; relative entries, directories and files that
// cannot be executed are passed over.
func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("noexec/prog", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "isdir", "prog"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := mk("good/prog", 0o755)
	t.Chdir(dir)
	mk("rel/prog", 0o755) // reachable only through the relative entry
	path := "PATH=rel:" + filepath.Join(dir, "noexec") + ":" + filepath.Join(dir, "isdir") + "::" + filepath.Join(dir, "good")
	if got, err := LookPath("prog", []string{path}); err != nil || got != want {
		t.Fatalf("LookPath = %q, %v; want %q", got, err, want)
	}
	if got, err := LookPath("./prog", nil); err != nil || got != "./prog" {
		t.Errorf("a name with a slash: %q, %v", got, err)
	}
	if _, err := LookPath("missing", []string{path}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a missing program: %v, want not found", err)
	}
}
