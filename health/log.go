package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// MaxLineMatched is how much of a line a log check matches: its first 4
// KiB. The rest of a longer line is skipped unread by the pattern, so that
// a check costs at most that much per line, whatever a program prints.
const MaxLineMatched = 4 << 10

// Lines matches a run's output against a pattern, line by line, as it
// comes in pieces of any size: a line cut across two pieces is matched
// whole. A line is matched once it ends (a newline; a carriage return
// before it is not part of it) or once MaxLineMatched bytes of it have
// come, whichever is first; a line still without its end is not matched
// yet. RE2 (regexp) matches in time linear in the line.
type Lines struct {
	re   *regexp.Regexp
	line []byte // the current line's first bytes, when it came in pieces
	skip bool   // the current line has been matched: wait for its end
}

// NewLines matches lines against re.
func NewLines(re *regexp.Regexp) *Lines {
	return &Lines{re: re}
}

// Write takes the next piece of output and says whether a line in it
// (or ending in it) matched. Once one has, the rest of p is not looked at.
func (l *Lines) Write(p []byte) bool {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if l.take(part, i >= 0) {
			return true
		}
	}
	return false
}

// take is part of the current line; ended says the line ends with it.
func (l *Lines) take(part []byte, ended bool) bool {
	defer func() {
		if ended {
			l.line, l.skip = l.line[:0], false
		}
	}()
	if l.skip {
		return false
	}
	line := part
	if len(l.line) > 0 || !ended {
		// In pieces: kept up to the bound, matched whole.
		room := MaxLineMatched - len(l.line)
		l.line = append(l.line, part[:min(room, len(part))]...)
		line = l.line
	}
	line = line[:min(len(line), MaxLineMatched)]
	switch {
	case len(line) == MaxLineMatched:
		// As long as it is matched: the rest waits for no one.
		l.skip = !ended
	case !ended:
		return false
	default:
		line = bytes.TrimSuffix(line, []byte("\r"))
	}
	return l.re.Match(line)
}

// Follow reads a run's output from where the run began, giving out
// every piece written after what it gave before (in order, never one
// twice), until ctx ends or out returns an error, which it returns. A
// piece may end anywhere in a line.
type Follow func(ctx context.Context, out func([]byte) error) error

// LogCheck judges a run by its output: healthy once a line matches, and
// unhealthy if none has within its time. It reports each of those once:
// a line that matches after the time is up makes the run healthy then.
type LogCheck struct {
	cancel context.CancelFunc
	done   chan struct{}
	timer  *time.Timer

	// mu guards matched and stopped, and is held while onChange runs, so
	// that calls are one at a time and none begins after Stop.
	mu      sync.Mutex
	matched bool
	stopped bool
}

// errMatched ends a Follow once a line matched.
var errMatched = errors.New("a line matched")

// followRetry is the wait before following again after a read failed.
var followRetry = time.Second

// StartLogCheck follows the run's output on a goroutine of its own and
// matches it against re; onChange hears true when a line matches, or
// false and why when none has within the time from started (a run
// adopted from an earlier daemon started before this call). It is
// called from one goroutine at a time, and must not block for long nor
// call Stop.
func StartLogCheck(follow Follow, re *regexp.Regexp, started time.Time, within time.Duration, onChange func(healthy bool, err error)) *LogCheck {
	ctx, cancel := context.WithCancel(context.Background())
	c := &LogCheck{cancel: cancel, done: make(chan struct{})}
	c.timer = time.AfterFunc(max(time.Until(started.Add(within)), 0), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.matched || c.stopped {
			return
		}
		onChange(false, fmt.Errorf("no line of its output matched health.log within %s of its start", within))
	})
	go c.run(ctx, follow, NewLines(re), onChange)
	return c
}

func (c *LogCheck) run(ctx context.Context, follow Follow, lines *Lines, onChange func(bool, error)) {
	defer close(c.done)
	for {
		err := follow(ctx, func(p []byte) error {
			if lines.Write(p) {
				return errMatched
			}
			return nil
		})
		switch {
		case errors.Is(err, errMatched):
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.stopped {
				c.matched = true
				c.timer.Stop()
				onChange(true, nil)
			}
			return
		case ctx.Err() != nil:
			return
		}
		// The log could not be read (a full disk, a rotation caught
		// badly): the follow goes on from where it was.
		select {
		case <-ctx.Done():
			return
		case <-time.After(followRetry):
		}
	}
}

// Stop ends the check and waits for its goroutine. No onChange call
// begins after it returns. It may be called more than once.
func (c *LogCheck) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.timer.Stop()
	c.cancel()
	<-c.done
}
