package logfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBook: one Log per name, shared; a removed name's files go, in use
// or not, and the name starts anew.
func TestBook(t *testing.T) {
	dir := t.TempDir()
	b := NewBook(dir, 0, 1)
	defer b.Close()
	if b.Log("web") != b.Log("web") {
		t.Fatal("two logs of one name")
	}
	if err := b.Log("web").Append([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if p := b.Path("web"); p != filepath.Join(dir, "web.log") {
		t.Errorf("path %s", p)
	}
	if _, err := os.Stat(b.Path("web")); err != nil {
		t.Fatal(err)
	}
	old := b.Log("web")
	if err := b.Remove("web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Path("web")); !os.IsNotExist(err) {
		t.Errorf("the removed log's file: %v", err)
	}
	if b.Log("web") == old {
		t.Error("a removed name kept its log")
	}

	// A log never asked for in this book, left by an earlier daemon.
	if err := os.WriteFile(b.Path("left"), []byte("x\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove("left"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Path("left")); !os.IsNotExist(err) {
		t.Errorf("a log not in use was not removed: %v", err)
	}
}
