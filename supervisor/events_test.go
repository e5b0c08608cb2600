package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestSlowReaderIsDropped: a subscriber that never reads is dropped once
// its buffer is full, and publishing never blocks on it.
func TestSlowReaderIsDropped(t *testing.T) {
	b := newBus()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := b.subscribe(ctx)
	live := b.subscribe(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < eventBuffer+10; i++ {
			b.publish(api.Event{Type: api.EventState})
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
	if n != eventBuffer {
		t.Fatalf("the dropped reader got %d events before its channel closed, want %d", n, eventBuffer)
	}
	cancel()
	for range live {
	}
}
