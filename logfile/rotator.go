package logfile

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A log its run writes itself is looked at every second while it grows:
// dated (Mark) and rotated once over its limit. Once a look finds it has
// not grown, its Waker is armed and the looks stop until it is written
// again: with thousands of quiet logs, a stat of each every few seconds
// was most of an idle daemon's CPU. A woken log, and a new run's, is
// looked at every second again. Without a Waker (no inotify, or its
// watches used up) the looks at a quiet log back off to every
// maxRotatorLook, so a burst after a quiet spell outgrows the limit by at
// most what it writes in that time.
const (
	minRotatorLook = time.Second
	maxRotatorLook = 8 * time.Second
)

// Rotator keeps the logs of a Book that their runs write themselves
// (Watch) dated and within their size limit. Logs the daemon writes are
// bounded as they are written, and are none of its business.
type Rotator struct {
	book *Book
	max  int64
	hold func(name string) func() (func(), error)
	warn func(name, msg string, err error)
	// waker is nil without inotify.
	waker *Waker

	// mu guards checks (the map; a look's fields are the loop's), and is
	// never held while a log is looked at.
	mu     sync.Mutex
	checks map[string]*look
}

// look is one log's schedule: the fields but reset are the loop's alone;
// reset is stored by whoever asks for a look (Watch, the Waker) and
// swapped by the loop.
type look struct {
	name  string
	next  time.Time
	every time.Duration
	size  int64
	// reset has the next tick look: a new run, or a write after a quiet
	// spell.
	reset atomic.Bool
}

// NewRotator keeps book's logs that are watched within max bytes.
// hold, when not nil, is what holds a log's writers still while it is
// rotated (Rotate's hold), by log name; warn hears of a look that failed.
// Without inotify, the Rotator works all the same, and err says why
// quiet logs are looked at every few seconds.
func NewRotator(book *Book, max int64, hold func(name string) func() (func(), error), warn func(name, msg string, err error)) (r *Rotator, err error) {
	r = &Rotator{book: book, max: max, hold: hold, warn: warn, checks: map[string]*look{}}
	r.waker, err = NewWaker(r.wake)
	return r, err
}

// Watch has the log of name looked at from the next tick on: its run
// writes it itself. Watching it again, for a new run, looks at it at the
// next tick whatever its schedule was.
func (r *Rotator) Watch(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.checks[name]; c != nil {
		c.reset.Store(true)
		return
	}
	r.checks[name] = &look{name: name}
}

// Unwatch stops looking at the log of name: the daemon writes it, or it
// is gone.
func (r *Rotator) Unwatch(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.checks, name)
}

// wake has the next look at a log come at the next tick: it was written
// after a quiet spell.
func (r *Rotator) wake(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.checks[name]; c != nil {
		c.reset.Store(true)
	}
}

// Run looks at the watched logs every second, those due, until ctx is
// done.
func (r *Rotator) Run(ctx context.Context) {
	t := time.NewTicker(minRotatorLook)
	defer t.Stop()
	// One slice for every pass: a fresh one each second was an idle
	// daemon's garbage.
	var due []*look
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.mu.Lock()
			due = due[:0]
			for _, c := range r.checks {
				due = append(due, c)
			}
			r.mu.Unlock()
			for _, c := range due {
				r.check(c, now)
			}
			clear(due)
		}
	}
}

// check dates what c's log gained and rotates it if it is over the size
// limit, if a look is due, and schedules the next look.
func (r *Rotator) check(c *look, now time.Time) {
	if c.reset.Swap(false) {
		c.next, c.every = time.Time{}, 0
	}
	if now.Before(c.next) {
		return
	}
	l := r.book.Log(c.name)
	size, err := l.Mark()
	if err != nil {
		r.warn(c.name, "cannot date the log", err)
	}
	if size >= min(r.max, l.MaxSize()) {
		var hold func() (func(), error)
		if r.hold != nil {
			hold = r.hold(c.name)
		}
		if _, err := l.Rotate(hold); err != nil {
			r.warn(c.name, "log rotation failed", err)
		}
	}
	// Quiet: it did not grow since the last look. With a waker that is
	// enough to stop looking; without one, the looks back off.
	quiet := size == c.size && c.every > 0
	if quiet {
		c.every = min(2*c.every, maxRotatorLook)
	} else {
		c.every = minRotatorLook
	}
	// Half a tick early, so that the tick at that time is not missed.
	c.size, c.next = size, now.Add(c.every-minRotatorLook/2)
	if quiet && r.waker != nil && r.waker.Arm(l.Path(), c.name) == nil {
		// A write between the look and the arming woke no one: look again.
		if again, err := l.Mark(); err == nil && again == size {
			c.next = now.AddDate(1000, 0, 0) // until woken
		}
	}
}

// Close stops the Rotator's Waker; Run ends with its context.
func (r *Rotator) Close() error {
	if r.waker == nil {
		return nil
	}
	return r.waker.Close()
}
