package logfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpen(t *testing.T) {
	// A strict umask proves the modes are forced, not inherited.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	tests := []struct {
		name     string
		existing *os.FileMode // mode of a file already there, if any
		wantMode os.FileMode
		want     string
	}{
		{name: "creates", wantMode: 0o640, want: "new\n"},
		{name: "keeps existing mode and content", existing: ptr(os.FileMode(0o600)), wantMode: 0o600, want: "old\nnew\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			path := filepath.Join(dir, "w.log")
			if tt.existing != nil {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("old\n"), *tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("new\n"); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.wantMode {
				t.Errorf("file mode %o, want %o", got, tt.wantMode)
			}
			if got := readFile(t, path); got != tt.want {
				t.Errorf("content %q, want %q", got, tt.want)
			}
			if tt.existing == nil {
				for _, d := range []string{dir, filepath.Dir(dir)} {
					di, err := os.Stat(d)
					if err != nil {
						t.Fatal(err)
					}
					if got := di.Mode().Perm(); got != 0o750 {
						t.Errorf("dir %s mode %o, want 750", d, got)
					}
				}
			}
		})
	}
}

// TestOpenAppendsAfterTruncate is the property rotation relies on: once
// the file is truncated, the writer's next write goes to the new end,
// not to its old offset behind a run of zeros.
func TestOpenAppendsAfterTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("before rotation\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "after\n" {
		t.Fatalf("content %q, want %q", got, "after\n")
	}
}

func ptr[T any](v T) *T { return &v }
