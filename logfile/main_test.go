package logfile

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Fast polling keeps Follow tests quick; tests that need the real
	// pace set it themselves.
	FollowPollInterval = 2 * time.Millisecond
	goleak.VerifyTestMain(m)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func appendFile(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is what Follow writes to in tests: read from the test
// goroutine while Follow writes from another, and flushable like an
// http.ResponseWriter.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	flushes int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushes++
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond for up to five seconds: Follow runs on its own
// schedule, and a generous deadline only costs time when a test fails.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitForOutput waits until out holds exactly want, and on timeout says
// what it holds instead.
func waitForOutput(t *testing.T, out *syncBuffer, want, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: output %q, want %q", what, out.String(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
