package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name string
		live *string  // nil: no live file
		gens []string // .1, .2, …; "-" means the file is missing
		n    int
		want string
	}{
		{name: "fewer than the file", live: ptr("a\nb\nc\nd\n"), n: 2, want: "c\nd\n"},
		{name: "exactly the file", live: ptr("a\nb\n"), n: 2, want: "a\nb\n"},
		{name: "more than the file", live: ptr("a\nb\n"), n: 10, want: "a\nb\n"},
		{name: "one line", live: ptr("a\nb\n"), n: 1, want: "b\n"},
		{name: "no trailing newline", live: ptr("a\nb\nc"), n: 2, want: "b\nc"},
		{name: "no newline at all", live: ptr("abc"), n: 1, want: "abc"},
		{name: "empty lines count", live: ptr("a\n\n\n"), n: 2, want: "\n\n"},
		{name: "empty file", live: ptr(""), n: 3, want: ""},
		{name: "negative means the whole live file", live: ptr("a\nb\nc\n"), gens: []string{"old\n"}, n: -1, want: "a\nb\nc\n"},
		{name: "zero means nothing", live: ptr("a\nb\nc\n"), gens: []string{"old\n"}, n: 0, want: ""},
		{name: "negative means the whole live file", live: ptr("a\nb"), n: -1, want: "a\nb"},
		{name: "missing live file", n: 3, want: ""},
		{name: "missing live file reads generations", gens: []string{"x\ny\n"}, n: 1, want: "y\n"},
		{name: "into the newest generation", live: ptr("4\n5\n"), gens: []string{"1\n2\n3\n"}, n: 3, want: "3\n4\n5\n"},
		{name: "across several generations", live: ptr("5\n"), gens: []string{"4\n", "3\n", "1\n2\n"}, n: 4, want: "2\n3\n4\n5\n"},
		{name: "all generations when short", live: ptr("3\n"), gens: []string{"2\n", "1\n"}, n: 10, want: "1\n2\n3\n"},
		{name: "ignores generations beyond the limit", live: ptr("3\n"), gens: []string{"2\n", "1\n", "0\n", "too old\n"}, n: 10, want: "0\n1\n2\n3\n"},
		{name: "skips a missing generation", live: ptr("3\n"), gens: []string{"-", "2\n"}, n: 10, want: "2\n3\n"},
		{name: "empty live file", live: ptr(""), gens: []string{"1\n2\n"}, n: 1, want: "2\n"},
		{name: "line split by a rotation counts once", live: ptr("c\n"), gens: []string{"a\nb"}, n: 1, want: "bc\n"},
	}
	// Tiny chunks make every line straddle chunk boundaries.
	for _, chunk := range []int{1, 2, 3, 32 << 10} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/chunk=%d", tt.name, chunk), func(t *testing.T) {
				defer func(old int) { tailChunk = old }(tailChunk)
				tailChunk = chunk
				path := filepath.Join(t.TempDir(), "w.log")
				if tt.live != nil {
					writeFile(t, path, *tt.live)
				}
				for i, g := range tt.gens {
					if g != "-" {
						writeFile(t, genPath(path, i+1), g)
					}
				}
				var out bytes.Buffer
				if err := Tail(&out, path, tt.n, 3); err != nil {
					t.Fatal(err)
				}
				if got := out.String(); got != tt.want {
					t.Errorf("Tail(n=%d) = %q, want %q", tt.n, got, tt.want)
				}
			})
		}
	}
}

// TestTailReadsFromTheEnd tails a huge sparse file: reading it whole
// would take minutes, reading backwards from the end takes one chunk.
func TestTailReadsFromTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const hole = 64 << 30
	if _, err := f.WriteAt([]byte("x\ny\nz\n"), hole); err != nil {
		f.Close()
		t.Skipf("filesystem cannot hold a sparse 64 GiB file: %v", err)
	}
	f.Close()
	var out bytes.Buffer
	if err := Tail(&out, path, 2, 0); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "y\nz\n" {
		t.Fatalf("Tail = %q, want %q", got, "y\nz\n")
	}
}
