package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

// Several logs are printed as one, in the order their lines were
// written: each source streams its records, and a record is printed
// only once every source still reading what its log held has offered
// one to compare with. Once a source has caught up (or ended), what it
// sends next is new and goes out as it comes.

type itemKind int

const (
	record       itemKind = iota
	caughtUp              // the source has sent what its log held
	reconnecting          // the source lost the daemon: it will send history again
	sourceEnded           // the source is done; rec is unused, err says why
)

type logItem struct {
	src  int
	kind itemKind
	rec  api.LogRecord
	err  error
}

// queueSlots bounds what one source may have waiting to be printed.
const queueSlots = 256

// mergeLogs runs read for each of n sources, each on its own goroutine,
// and prints their records through p in time order. The first source
// that fails (a name not found) ends them all, and its error is
// returned.
func mergeLogs(ctx context.Context, n int, p *logPrinter, read func(ctx context.Context, src int, out func(logItem) error) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan logItem, n)
	slots := make([]chan struct{}, n)
	for i := range n {
		slots[i] = make(chan struct{}, queueSlots)
		go func() {
			out := func(it logItem) error {
				if it.kind == record {
					it.rec.Data = bytes.Clone(it.rec.Data)
					select {
					case slots[i] <- struct{}{}:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				select {
				case items <- it:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			err := read(ctx, i, out)
			items <- logItem{src: i, kind: sourceEnded, err: err}
		}()
	}
	m := merger{queues: make([][]api.LogRecord, n), ready: make([]bool, n)}
	ended := make([]bool, n)
	var first error
	fail := func(err error) {
		if err != nil && first == nil {
			first = err
			cancel()
		}
	}
	for live := n; ; {
		for i := m.pick(); i >= 0; i = m.pick() {
			r := m.queues[i][0]
			m.queues[i] = m.queues[i][1:]
			<-slots[i]
			fail(p.record(i, r))
			if ended[i] && len(m.queues[i]) == 0 {
				p.end(i)
			}
		}
		if live == 0 {
			return first // every source ready: all printed
		}
		it := <-items
		switch it.kind {
		case record:
			m.queues[it.src] = append(m.queues[it.src], it.rec)
		case caughtUp:
			m.ready[it.src] = true
		case reconnecting:
			m.ready[it.src] = false
		case sourceEnded:
			live--
			m.ready[it.src], ended[it.src] = true, true
			if len(m.queues[it.src]) == 0 {
				p.end(it.src)
			}
			fail(it.err)
		}
	}
}

type merger struct {
	queues [][]api.LogRecord
	// ready is set for a source whose next records are new (caught up)
	// or that has ended: nothing older can come from it.
	ready []bool
}

// pick is the source whose first queued record is the oldest, or -1
// while a source that may still send older ones has none queued.
func (m *merger) pick() int {
	best := -1
	for i, q := range m.queues {
		if len(q) == 0 {
			if !m.ready[i] {
				return -1
			}
			continue
		}
		if best < 0 || q[0].Time.Before(m.queues[best][0].Time) {
			best = i
		}
	}
	return best
}

// logPrinter writes records as lines: behind their workload's name when
// there are several (coloured on a terminal), and behind the time the
// line was written with timestamps. Lines of different workloads never
// mix mid-line: a line is held until it ends. One workload's log without
// either goes out exactly as the log holds it, unless escape is set: then
// its control characters are escaped (escaper), as for a terminal.
type logPrinter struct {
	w      io.Writer
	prefix []string // nil for none
	stamps bool
	escape bool
	esc    []escaper   // a source's, when escape is set
	buf    []byte      // what is written, escaped
	parts  [][]byte    // a source's line begun but not printed
	began  []time.Time // when that line was written
	mid    []bool      // passing through: inside a line
}

// prefixColours are ANSI colours that read on dark and light terminals.
var prefixColours = []string{"36", "33", "32", "35", "34", "31"}

// stampLayout is how --timestamps writes a time.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

func newLogPrinter(w io.Writer, names []string, prefixed, stamps bool) *logPrinter {
	p := &logPrinter{w: w, stamps: stamps, parts: make([][]byte, len(names)), began: make([]time.Time, len(names)), mid: make([]bool, len(names))}
	if !prefixed {
		return p
	}
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	f, ok := w.(*os.File)
	colour := ok && cli.IsTerminal(f)
	for i, n := range names {
		s := fmt.Sprintf("%-*s | ", width, n)
		if colour {
			s = "\x1b[" + prefixColours[i%len(prefixColours)] + "m" + s + "\x1b[0m"
		}
		p.prefix = append(p.prefix, s)
	}
	return p
}

func (p *logPrinter) head(i int, at time.Time) string {
	var h string
	if p.prefix != nil {
		h = p.prefix[i]
	}
	if p.stamps {
		h += at.UTC().Format(stampLayout) + " "
	}
	return h
}

func (p *logPrinter) record(i int, r api.LogRecord) error {
	if p.prefix == nil {
		// One log: nothing to keep apart, so nothing is held back.
		if !p.mid[i] && p.stamps {
			if _, err := io.WriteString(p.w, p.head(i, r.Time)); err != nil {
				return err
			}
		}
		p.mid[i] = !bytes.HasSuffix(r.Data, []byte("\n"))
		_, err := p.w.Write(p.escaped(i, r.Data, false))
		return err
	}
	if len(p.parts[i]) == 0 {
		p.began[i] = r.Time
	}
	p.parts[i] = append(p.parts[i], r.Data...)
	if !bytes.HasSuffix(r.Data, []byte("\n")) {
		return nil
	}
	line := p.parts[i]
	p.parts[i] = line[:0]
	_, err := io.WriteString(p.w, p.head(i, p.began[i])+string(p.escaped(i, line, true)))
	return err
}

// escaped is b as it is written of source i: escaped when the printer
// escapes, with final as for escaper.escape. It is valid until the next.
func (p *logPrinter) escaped(i int, b []byte, final bool) []byte {
	if !p.escape {
		return b
	}
	if p.esc == nil {
		p.esc = make([]escaper, len(p.parts))
	}
	p.buf = p.esc[i].escape(p.buf[:0], b, final)
	return p.buf
}

// end writes what is left of source i's last line, ended with a newline.
func (p *logPrinter) end(i int) {
	if rest := p.parts[i]; len(rest) > 0 {
		_, _ = io.WriteString(p.w, p.head(i, p.began[i])+string(p.escaped(i, rest, true))+"\n")
		p.parts[i] = nil
	}
	if p.esc != nil && len(p.esc[i].held) > 0 {
		_, _ = p.w.Write(p.escaped(i, nil, true)) // one log's last, cut short
	}
}
