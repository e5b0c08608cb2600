package logfile

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// TestRotatorKeepsWatchedLogsBounded: a watched log its writer takes over
// the limit is rotated at a look, its writers held meanwhile; a quiet log
// is left to the waker, and rotated again once it is written after the
// quiet spell; an unwatched log is never looked at.
func TestRotatorKeepsWatchedLogsBounded(t *testing.T) {
	dir := t.TempDir()
	const max = 1024
	book := NewBook(dir, max, 2)
	defer book.Close()
	var mu sync.Mutex
	held := map[string]int{}
	hold := func(name string) func() (func(), error) {
		return func() (func(), error) {
			mu.Lock()
			held[name]++
			mu.Unlock()
			return func() {}, nil
		}
	}
	r, err := NewRotator(book, max, hold, func(name, msg string, err error) { t.Errorf("%s: %s: %v", name, msg, err) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Each written as its run would: through a descriptor of its own.
	write := func(name string) {
		f, err := Open(book.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(bytes.Repeat([]byte("x"), 2*max)); err != nil {
			t.Fatal(err)
		}
	}
	rotated := func(name string) bool {
		_, err := os.Stat(book.Path(name) + ".1")
		return err == nil
	}
	waitRotated := func(name string, times int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := held[name]
			mu.Unlock()
			if n >= times && rotated(name) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: rotated %d times; want %d", name, n, times)
			}
		}
	}
	r.Watch("shim")
	write("shim")
	write("piped") // the daemon's to bound: no look of the rotator's
	waitRotated("shim", 1)

	// Quiet for a look or two: the waker is armed, and the next write
	// has it looked at again.
	time.Sleep(2500 * time.Millisecond)
	write("shim")
	waitRotated("shim", 2)
	mu.Lock()
	if rotated("piped") || held["piped"] > 0 {
		t.Error("a log not watched was rotated")
	}
	mu.Unlock()
	r.Unwatch("shim")
	r.mu.Lock()
	if r.checks["shim"] != nil {
		t.Error("an unwatched log is still looked at")
	}
	r.mu.Unlock()
}
