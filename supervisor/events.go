package supervisor

import (
	"context"
	"sync"

	"github.com/flyd-dev/flyd/api"
)

// eventBuffer is how far a subscriber may fall behind before it is dropped.
const eventBuffer = 256

// bus fans events out to subscribers. Publishing never blocks: a subscriber
// whose buffer is full is dropped (its channel closed), so a slow reader can
// never stall a workload's lifecycle.
type bus struct {
	mu   sync.Mutex
	subs map[chan api.Event]struct{}
}

func newBus() *bus { return &bus{subs: map[chan api.Event]struct{}{}} }

func (b *bus) publish(ev api.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns a channel of events that is closed when ctx is done or
// the subscriber is dropped.
func (b *bus) subscribe(ctx context.Context) <-chan api.Event {
	ch := make(chan api.Event, eventBuffer)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	})
	return ch
}
