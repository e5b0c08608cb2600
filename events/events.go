// Package events numbers what the daemon reports (status.Event), keeps it
// in a bounded history on disk and fans it out to subscribers, which may
// resume after the last event they had, across a restart of the daemon.
// It decides nothing and knows nothing of workloads: the supervisor
// publishes, the API subscribes.
package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/flyd-dev/flyd/logfile"
	"github.com/flyd-dev/flyd/status"
)

// buffer is how far a subscriber may fall behind before it is dropped.
const buffer = 256

// maxFile is the size at which the event history starts a new file;
// it keeps this and one older file: some ten thousand events.
const maxFile = 1 << 20

// Bus numbers events, keeps them on disk and fans them out to
// subscribers. Publishing never blocks: a subscriber whose buffer is
// full is dropped (its channel closed), so a slow reader can never stall
// a workload's lifecycle.
//
// The history (events.log, then events.log.1, one JSON event a line)
// lets a reader that lost the daemon, to a restart or a crash, resume
// after the last event it had: the numbers go on from the history's
// last one.
type Bus struct {
	// mu guards every field below but path (set at open), with the
	// writer's exception said at f; it is idle's lock, and nothing else
	// is taken while it is held (a subscriber is sent to without waiting).
	mu   sync.Mutex
	subs map[chan status.Event]struct{}
	seq  uint64
	path string // "" keeps no history
	// pending is the history not yet written, in order: the events
	// published while a write was under way go out together in the next,
	// so a burst (a batch of 200 stops is 600 events) costs a few
	// write(2)s, none of them under mu. writing says a writer is at work;
	// idle is signalled when it stops.
	pending, spare []byte
	writing        bool
	idle           sync.Cond
	// The file, its size and the last write's error belong to the writer
	// while writing is set, and to whoever holds mu otherwise.
	f    *os.File
	size int64
	werr error
	// failing is set while the history cannot be written, so that only
	// the first failure of a spell is reported.
	failing bool
	closed  bool
}

// Open opens the history at path ("" for none) and numbers on from its
// last event.
func Open(path string) (*Bus, error) {
	b := &Bus{subs: map[chan status.Event]struct{}{}, path: path}
	b.idle.L = &b.mu
	if path == "" {
		return b, nil
	}
	var last bytes.Buffer
	if err := logfile.Tail(&last, path, 1, 1); err != nil {
		return nil, err
	}
	var rec eventRecord
	if last.Len() > 0 && json.Unmarshal(last.Bytes(), &rec) == nil {
		b.seq = rec.Seq
	}
	return b, b.open()
}

func (b *Bus) open() error {
	f, err := os.OpenFile(b.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	b.f, b.size = f, fi.Size()
	return nil
}

// Close ends every subscription and the history, once what was published
// is written.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
	b.waitWritten()
	b.closed = true
	if b.f != nil {
		b.f.Close()
		b.f = nil
	}
}

// Publish numbers ev, queues it for the history and sends it to every
// subscriber. It returns the error of a history that stopped taking
// events, once per spell of failures.
func (b *Bus) Publish(ev status.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	err := b.keep(ev)
	if err == nil {
		err = b.werr
	}
	report := err != nil && !b.failing
	b.failing = err != nil
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
	if !report {
		return nil
	}
	return err
}

// Last is the number of the last event published.
func (b *Bus) Last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// eventRecord is an event as the history keeps it: its own format, so
// that neither the API's nor the status type's changes rewrite it.
type eventRecord struct {
	Seq      uint64       `json:"seq"`
	Time     time.Time    `json:"time"`
	Type     string       `json:"type"`
	Workload string       `json:"workload,omitempty"`
	Project  string       `json:"project,omitempty"`
	State    status.State `json:"state,omitempty"`
	Message  string       `json:"message,omitempty"`
	Exit     *ExitRecord  `json:"exit,omitempty"`
	By       uint32       `json:"by,omitempty"`
}

// ExitRecord is a run's end as the history keeps it, and as the
// supervisor's records keep it too: a format of its own.
type ExitRecord struct {
	Code        int       `json:"code"`
	Signal      string    `json:"signal,omitempty"`
	At          time.Time `json:"at"`
	Unknown     bool      `json:"unknown,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Description string    `json:"description"`
}

func recordOf(ev status.Event) eventRecord {
	return eventRecord{ev.Seq, ev.Time, ev.Type, ev.Workload, ev.Project, ev.State, ev.Message, RecordExit(ev.Exit), ev.By}
}

func (r eventRecord) event() status.Event {
	return status.Event{Seq: r.Seq, Time: r.Time, Type: r.Type, Workload: r.Workload, Project: r.Project, State: r.State, Message: r.Message, Exit: r.Exit.Exit(), By: r.By}
}

// keep queues ev for the history, and starts a writer if none is at
// work. The caller holds mu.
func (b *Bus) keep(ev status.Event) error {
	if b.path == "" || b.closed {
		return nil
	}
	line, err := appendRecord(b.pending, recordOf(ev))
	if err != nil {
		return err
	}
	b.pending = append(line, '\n')
	if !b.writing {
		b.writing = true
		go b.writeOut()
	}
	return nil
}

// writeOut writes what is pending until nothing is, then says the
// history is idle.
func (b *Bus) writeOut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.pending) > 0 {
		out := b.pending
		b.pending, b.spare = b.spare[:0], nil
		b.mu.Unlock()
		err := b.write(out)
		b.mu.Lock()
		b.spare, b.werr = out[:0], err
	}
	b.writing = false
	b.idle.Broadcast()
}

// write appends lines to the history, starting a new file first when
// they would take it past maxFile. Only the writer calls it.
func (b *Bus) write(lines []byte) error {
	if b.f == nil {
		// A new file that could not be opened: tried again.
		if err := b.open(); err != nil {
			return err
		}
	}
	if b.size > 0 && b.size+int64(len(lines)) >= maxFile {
		b.f.Close()
		b.f = nil
		if err := os.Rename(b.path, b.path+".1"); err != nil {
			return err
		}
		if err := b.open(); err != nil {
			return err
		}
	}
	n, err := b.f.Write(lines)
	b.size += int64(n)
	return err
}

// waitWritten returns once everything published before it is written.
// The caller holds mu.
func (b *Bus) waitWritten() {
	for b.writing {
		b.idle.Wait()
	}
}

// Subscribe returns a channel of events that is closed when ctx is done
// or the subscriber is dropped. With after > 0 it first replays the
// events of the history numbered after it, then goes on with new ones;
// a gap in the numbers shows what the history no longer holds.
func (b *Bus) Subscribe(ctx context.Context, after uint64) <-chan status.Event {
	live := make(chan status.Event, buffer)
	b.mu.Lock()
	b.subs[live] = struct{}{}
	upTo := b.seq
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[live]; ok {
			delete(b.subs, live)
			close(live)
		}
	})
	if after == 0 || after >= upTo || b.path == "" {
		return live
	}
	out := make(chan status.Event)
	go func() {
		defer close(out)
		send := func(ev status.Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !b.Replay(after, upTo, send) {
			return
		}
		for ev := range live {
			if !send(ev) {
				return
			}
		}
	}()
	return out
}

// Replay sends the events the history holds numbered in (after, upTo],
// oldest first; it reports false once send does.
func (b *Bus) Replay(after, upTo uint64, send func(status.Event) bool) bool {
	if b.path == "" {
		return true
	}
	b.mu.Lock()
	b.waitWritten()
	b.mu.Unlock()
	for _, p := range []string{b.path + ".1", b.path} {
		if !replayFile(p, after, upTo, send) {
			return false
		}
	}
	return true
}

// replayFile is Replay of one file of the history.
func replayFile(path string, after, upTo uint64, send func(status.Event) bool) bool {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return true // replay what can be read; the numbers show the gap
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec eventRecord
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Seq <= after || rec.Seq > upTo {
			continue
		}
		if !send(rec.event()) {
			return false
		}
	}
	return true
}

// RecordExit is e as a record keeps it; nil for nil.
func RecordExit(e *status.Exit) *ExitRecord {
	if e == nil {
		return nil
	}
	r := ExitRecord(*e)
	return &r
}

// Exit is the run's end a record kept; nil for nil.
func (r *ExitRecord) Exit() *status.Exit {
	if r == nil {
		return nil
	}
	e := status.Exit(*r)
	return &e
}
