package devwatch

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSyncInto: files, directories and links are made in the tree at its
// target as they are in the source, removals too, and a symlink in the
// tree leads inside it, never out to the host.
func TestSyncInto(t *testing.T) {
	src, root, host := t.TempDir(), t.TempDir(), t.TempDir()
	// The container's /app is a link to an absolute path, which names the
	// host's directory from the host, and the container's own inside it.
	if err := os.Symlink(host, filepath.Join(root, "app")); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(root, host)
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite := func(p, text string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(src, "a.txt"), "A", 0o640)
	mustWrite(filepath.Join(src, "sub", "deep", "b.sh"), "B", 0o755)
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	mustWrite(filepath.Join(inside, "old", "x"), "stale", 0o644)
	mustWrite(filepath.Join(inside, "kept"), "kept", 0o644)

	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	st, err := syncInto(fd, "/app", src, []string{"a.txt", "sub", "sub/deep/b.sh", "link", "old", "old/x", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if st.copied != 3 || st.removed != 2 {
		t.Errorf("stats %+v (%s)", st, st)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 0 {
		t.Fatalf("the host's directory got %v: the sync left the tree", entries)
	}
	if b, err := os.ReadFile(filepath.Join(inside, "a.txt")); err != nil || string(b) != "A" {
		t.Errorf("a.txt: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(inside, "sub", "deep", "b.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("b.sh: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(inside, "link")); err != nil || l != "a.txt" {
		t.Errorf("link: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(inside, "old")); !os.IsNotExist(err) {
		t.Errorf("old, removed from the source, is still in the tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(inside, "kept")); err != nil {
		t.Errorf("kept, not among the changes, went: %v", err)
	}

	// One file, at the target itself.
	if _, err := syncInto(fd, "/etc/app.conf", filepath.Join(src, "a.txt"), []string{""}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "app.conf")); err != nil || string(b) != "A" {
		t.Errorf("app.conf: %q %v", b, err)
	}
}

// TestOpenRoot: a live process's root opens as a directory (this test's
// own is the host's); a pid that is no process's is an error.
func TestOpenRoot(t *testing.T) {
	fd, err := OpenRoot(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st, want unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/", &want); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Fatalf("this process's root is not /: %+v", st)
	}
	if fd, err := OpenRoot(1 << 30); err == nil || fd != -1 {
		t.Fatalf("the root of no process: %d, %v", fd, err)
	}
}
