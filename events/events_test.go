package events

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSlowReaderIsDropped: a subscriber that never reads is dropped once
// its buffer is full, and publishing never blocks on it.
func TestSlowReaderIsDropped(t *testing.T) {
	b, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := b.Subscribe(ctx, 0)
	live := b.Subscribe(ctx, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < buffer+10; i++ {
			b.Publish(status.Event{Type: status.EventState})
			select { // the live reader keeps up
			case <-live:
			default:
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publishing blocked on a reader that never reads")
	}
	n := 0
	for range stuck {
		n++
	}
	if n != buffer {
		t.Fatalf("the dropped reader got %d events before its channel closed, want %d", n, buffer)
	}
	cancel()
	for range live {
	}
}

// TestEventHistory: events are numbered on across a restart of the bus
// (a new daemon), and a reader that asks for those after the last it had
// gets each once, in order, the kept ones first and then new ones,
// across the history's change of file.
func TestEventHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.log")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4<<10)
	n := 2 * maxFile / len(big) // enough to start a new file, twice
	for i := range n {
		if err := b.Publish(status.Event{Type: status.EventState, Message: fmt.Sprint(i) + big[:len(big)-8]}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("the history never started a new file: %v", err)
	}

	b, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.seq != uint64(n) {
		t.Fatalf("a new bus numbers on from %d, want %d", b.seq, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after := uint64(n - 100)
	ch := b.Subscribe(ctx, after)
	if err := b.Publish(status.Event{Type: status.EventApplied}); err != nil {
		t.Fatal(err)
	}
	for want := after + 1; want <= uint64(n+1); want++ {
		select {
		case ev := <-ch:
			if ev.Seq != want {
				t.Fatalf("got event %d, want %d", ev.Seq, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never came", want)
		}
	}
	cancel()
	for range ch {
	}
}

// TestEventHistoryKeepsTheProject: an event of a project's workload says
// its project, from the history too (a reader resuming after a restart
// filters by it).
func TestEventHistoryKeepsTheProject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.log")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(status.Event{Type: status.EventState, Workload: "ci-7.app", Project: "ci-7"}); err != nil {
		t.Fatal(err)
	}
	var got []status.Event
	b.Replay(0, b.Last(), func(ev status.Event) bool { got = append(got, ev); return true })
	b.Close()
	if len(got) != 1 || got[0].Project != "ci-7" || got[0].Workload != "ci-7.app" {
		t.Errorf("replayed %+v; want the event with its project", got)
	}
}

// TestBurstIsKeptInOrder: events published at once from many goroutines
// reach the history whole and in their numbers' order, and a replay asked
// right after the last publish sees every one of them.
func TestBurstIsKeptInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.log")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const publishers, each = 8, 250
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				if err := b.Publish(status.Event{Type: status.EventState, Message: fmt.Sprint(p, "-", i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var seqs []uint64
	b.Replay(0, b.Last(), func(ev status.Event) bool { seqs = append(seqs, ev.Seq); return true })
	if len(seqs) != publishers*each {
		t.Fatalf("replayed %d events, want %d", len(seqs), publishers*each)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("event %d of the history is numbered %d", i+1, s)
		}
	}
}

// TestHistoryFailureIsReportedOnce: a history that stops taking events
// (its older file cannot be replaced: a directory stands there) is said
// by a Publish after the failed write, once for the spell, and the events
// still reach the readers of now.
func TestHistoryFailureIsReportedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.log")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := os.MkdirAll(filepath.Join(path+".1", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := b.Subscribe(ctx, 0)
	big := strings.Repeat("x", 64<<10)
	reports, got := 0, 0
	for i := range 2 * maxFile / len(big) {
		if err := b.Publish(status.Event{Type: status.EventState, Message: fmt.Sprint(i) + big}); err != nil {
			reports++
		}
		// Each write is waited for, so that the next Publish sees how it
		// went.
		b.mu.Lock()
		b.waitWritten()
		b.mu.Unlock()
		select {
		case <-live:
			got++
		default:
		}
	}
	if reports != 1 {
		t.Errorf("the failing history was reported %d times; want once", reports)
	}
	if got != 2*maxFile/len(big) {
		t.Errorf("readers had %d events of %d", got, 2*maxFile/len(big))
	}
}
