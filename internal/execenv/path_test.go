package execenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestLookPathAs: a program in a directory the user may not search, or
// one it may not execute, is not found, as if absent; one it may run is
// found; root finds every one.
func TestLookPathAs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files of other owners")
	}
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Dir(dir)} { // t.TempDir's are 0700
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(rel string, dirMode, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(p), dirMode); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("closed/prog", 0o700, 0o755) // root's: nobody may not search it
	mk("rootonly/prog", 0o755, 0o700)
	mk("open/prog", 0o755, 0o755)
	if err := os.Symlink(filepath.Join(dir, "closed", "prog"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	mk("links/keep", 0o755, 0o644)
	if err := os.Symlink(filepath.Join(dir, "closed", "prog"), filepath.Join(dir, "links", "prog")); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	for _, tt := range []struct {
		path string
		cred *syscall.Credential
		want string
	}{
		{"closed", nobody, ""},
		{"rootonly", nobody, ""},
		{"links", nobody, ""}, // a symlink into a closed directory
		{"closed:rootonly:open", nobody, "open"},
		{"closed", nil, "closed"},
		{"closed", &syscall.Credential{}, "closed"},
	} {
		var dirs []string
		for _, d := range strings.Split(tt.path, ":") {
			dirs = append(dirs, filepath.Join(dir, d))
		}
		got, err := LookPathAs("prog", []string{"PATH=" + strings.Join(dirs, ":")}, tt.cred)
		switch {
		case tt.want == "" && !errors.Is(err, errdefs.ErrNotFound):
			t.Errorf("PATH %s as %v: %q, %v; want not found", tt.path, tt.cred, got, err)
		case tt.want != "" && got != filepath.Join(dir, tt.want, "prog"):
			t.Errorf("PATH %s as %v: %q, %v; want %s/prog", tt.path, tt.cred, got, err, tt.want)
		}
	}
}
