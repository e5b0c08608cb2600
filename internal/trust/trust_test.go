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
	// A user's symlink to a root folder: trusted once, re-pointed later.
	theirLink := filepath.Join(base, "their-link")
	if err := os.Symlink(good, theirLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(theirLink, 65534, -1); err != nil {
		t.Fatal(err)
	}
	rootLink := filepath.Join(base, "root-link")
	if err := os.Symlink("good", rootLink); err != nil {
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
		{filepath.Join(theirLink, "state"), "their-link is a symlink owned by uid 65534"},
		{filepath.Join(rootLink, "state"), ""},
	}
	for _, tt := range tests {
		real, err := Dir("state dir", tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want trusted", tt.path, err)
		case tt.want == "" && strings.Contains(real, "link"):
			t.Errorf("%s: used as %s, want its links resolved", tt.path, real)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "state dir "+tt.path)):
			t.Errorf("%s: %v, want refused naming it: %s", tt.path, err, tt.want)
		}
	}
}

// TestTrustedFile: a file read as instructions is trusted only when only
// root could have written it, whatever links lead to it, and never when
// the kernel made it up from what a process said (/proc/PID/cmdline of a
// non-dumpable process is a root-owned 0444 file of the process's words).
func TestTrustedFile(t *testing.T) {
	testenv.RequireRoot(t, "the files are given to another user")
	base := t.TempDir()
	write := func(rel string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("name: x\n"), mode); err != nil {
			t.Fatal(err)
		}
		return own(t, p, mode, uid)
	}
	good := write("etc/flyd.yaml", 0o644, 0)
	theirs := write("etc/theirs.yaml", 0o644, 65534)
	open := write("etc/open.yaml", 0o666, 0)
	inTheirDir := write("home/u/flyd.yaml", 0o644, 0)
	own(t, filepath.Dir(inTheirDir), 0o755, 65534)
	sticky := filepath.Join(base, "tmp")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, sticky, 0o777|os.ModeSticky, 0)
	inSticky := write("tmp/flyd.yaml", 0o644, 0)
	linkTo := func(name, target string, uid int) string {
		p := filepath.Join(base, "etc", name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		path string
		want string // "" for trusted
	}{
		{good, ""},
		{linkTo("to-good", "flyd.yaml", 0), ""},
		{theirs, "owned by uid 65534"},
		{open, "writable by group or others"},
		{inTheirDir, "owned by uid 65534"},
		{inSticky, "writable by group or others"},
		{linkTo("their-link", "flyd.yaml", 65534), "symlink owned by uid 65534"},
		{linkTo("to-their-dir", inTheirDir, 0), "owned by uid 65534"},
		{"/proc/1/cmdline", "on procfs"},
		{linkTo("to-proc", "/proc/self/cmdline", 0), "on procfs"},
		{"/sys/kernel/mm/transparent_hugepage/enabled", "on sysfs"},
		{"/dev/null", "not a regular file"},
		{filepath.Join(base, "etc"), "not a regular file"},
	}
	for _, tt := range tests {
		f, err := File("config", tt.path)
		if err == nil {
			f.Close()
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want trusted", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "config "+tt.path)):
			t.Errorf("%s: %v, want refused naming it: %s", tt.path, err, tt.want)
		}
	}

	// From a trusted directory's descriptor: its own files, and links out
	// of it only to files File trusts.
	dir, err := OpenDir("workloads dir", filepath.Join(base, "etc"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for name, want := range map[string]string{
		"flyd.yaml": "", "to-good": "", "theirs.yaml": "owned by uid 65534", "to-proc": "on procfs",
		"to-their-dir": "owned by uid 65534", "../etc/flyd.yaml": "not a file name",
	} {
		f, err := OpenIn(dir, name)
		if err == nil {
			f.Close()
		}
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("OpenIn %s: %v, want %q", name, err, want)
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
