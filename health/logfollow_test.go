package health

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/logfile"
)

// collect follows until want bytes came, and says what came. It ends the
// follow as a check's owner does, by its context.
func collect(t *testing.T, f Follow, want int) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timeout := time.AfterFunc(5*time.Second, cancel)
	defer timeout.Stop()
	var got []byte
	_ = f(ctx, func(p []byte) error {
		got = append(got, p...)
		if len(got) >= want {
			cancel()
		}
		return nil
	})
	if len(got) < want {
		t.Fatalf("follow ended after %q", got)
	}
	return string(got)
}

// TestFollowLog: a run's output is followed from where it began, or, not
// known, from where the log ends; a follow taken up again goes on where
// it stopped, never giving a piece twice.
func TestFollowLog(t *testing.T) {
	l := logfile.NewLog(filepath.Join(t.TempDir(), "w.log"), 0, 1)
	defer l.Close()
	if err := l.Append([]byte("before the run\n")); err != nil {
		t.Fatal(err)
	}
	from, err := LogEnd(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	began := FollowLog(l, from)
	unknown := FollowLog(l, -1)
	if got := collect(t, began, len("first\n")); got != "first\n" {
		t.Fatalf("from where the run began: %q", got)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = l.Append([]byte("second\n"))
	}()
	if got := collect(t, unknown, len("second\n")); got != "second\n" {
		t.Fatalf("from where the log ended: %q", got)
	}
	if got := collect(t, began, len("second\n")); got != "second\n" {
		t.Fatalf("taken up again: %q", got)
	}
}

// TestLogEndOfNoLog: an empty log ends at its beginning.
func TestLogEndOfNoLog(t *testing.T) {
	l := logfile.NewLog(filepath.Join(t.TempDir(), "w.log"), 0, 1)
	defer l.Close()
	end, err := LogEnd(l)
	if err != nil || end != 0 {
		t.Fatalf("LogEnd = %d, %v; want 0", end, err)
	}
}
