package logfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWaker: an armed file wakes its key once, at its next write or its
// removal; a file written while not armed wakes no one.
func TestWaker(t *testing.T) {
	woken := make(chan string, 16)
	w, err := NewWaker(func(key string) { woken <- key })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("first\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	appendTo := func(p string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("more\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-woken:
			if got != want {
				t.Fatalf("woke %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not woken", want)
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case got := <-woken:
			t.Fatalf("woke %q, want none", got)
		case <-time.After(100 * time.Millisecond):
		}
	}

	if err := w.Arm(a, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Arm(a, "a"); err != nil { // armed again: still one wake
		t.Fatal(err)
	}
	appendTo(b) // not armed
	quiet()
	appendTo(a)
	appendTo(a)
	expect("a")
	quiet() // one-shot: the second write woke no one
	if err := w.Arm(b, "b"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	expect("b")
	if err := w.Arm(filepath.Join(dir, "missing.log"), "m"); err == nil {
		t.Error("arming a file that does not exist succeeded")
	}
}
