package main

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
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
		return p
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
		err := trustedDir("state dir", tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want trusted", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "state dir "+tt.path)):
			t.Errorf("%s: %v, want refused naming it: %s", tt.path, err, tt.want)
		}
	}
}
