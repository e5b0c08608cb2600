package trust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestTrustedDir: what another user owns or can write, the dir itself or a
// directory above it, is refused with the path and the reason.
func TestTrustedDir(t *testing.T) {
	testenv.RequireRoot(t, "the directories are given to another user")
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return own(t, p, mode, uid)
	}
	good := mk("good", 0o755, 0)
	theirs := mk("theirs", 0o755, 65534)
	open := mk("open", 0o777, 0)
	sticky := mk("sticky", 0o777|os.ModeSticky, 0)
	inSticky := mk("sticky/mine", 0o700, 0)
	userParent := mk("userparent", 0o755, 65534)
	link := filepath.Join(base, "link")
	if err := os.Symlink(theirs, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string // "" for trusted
	}{
		{good, ""},
		{filepath.Join(good, "not-yet"), ""},
		{inSticky, ""},
		{theirs, "owned by uid 65534"},
		{filepath.Join(theirs, "state"), "owned by uid 65534"},
		{open, "writable by group or others"},
		{sticky, "writable by group or others"},
		{filepath.Join(userParent, "workloads.d"), "owned by uid 65534"},
		{link, "owned by uid 65534"},
	}
	for _, tt := range tests {
		err := Dir("state dir", tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want trusted", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "state dir "+tt.path)):
			t.Errorf("%s: %v, want refused naming it: %s", tt.path, err, tt.want)
		}
	}
}

// TestProgram: the daemon program flyd execs is refused when someone who
// could not change flyd itself could change it or its directory.
func TestProgram(t *testing.T) {
	testenv.RequireRoot(t, "the files are given to other users")
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return own(t, p, mode, uid)
	}
	self := mk("bin/flyd", 0o755, 65534) // a developer's build, run with sudo
	openDir := filepath.Join(base, "open")
	if err := os.MkdirAll(openDir, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, openDir, 0o777, 0)
	tests := []struct {
		path string
		want string // "" for trusted
	}{
		{mk("bin/by-root", 0o755, 0), ""},
		{mk("bin/by-flyds-owner", 0o755, 65534), ""},
		{mk("bin/by-another", 0o755, 12345), "owned by uid 12345, neither root nor the owner"},
		{mk("bin/writable", 0o775, 0), "writable by group or others"},
		{mk("open/flyd-daemon", 0o755, 0), "open is writable by group or others"},
		{filepath.Join(base, "bin"), "not a regular file"},
	}
	for _, tt := range tests {
		err := Program(tt.path, self)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want trusted", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want refused: %s", tt.path, err, tt.want)
		}
	}
}

// own gives path the mode and the owner, past the umask.
func own(t *testing.T, path string, mode os.FileMode, uid int) string {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	return path
}
