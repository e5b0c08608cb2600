package devwatch

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// changes are the paths that changed since the last action.
type changes struct {
	names map[string]bool
	more  int
	lost  bool // the kernel's queue overflowed: what changed is unknown
}

func (c *changes) add(rel string) {
	if c.names == nil {
		c.names = map[string]bool{}
	}
	if len(c.names) < maxChanges || c.names[rel] {
		c.names[rel] = true
	} else {
		c.more++
	}
}

func (c *changes) empty() bool { return len(c.names) == 0 && c.more == 0 && !c.lost }

// sorted are the names kept, in order.
func (c *changes) sorted() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for n := range c.names {
			if !yield(n) {
				return
			}
		}
	})
}

// String names the first few changes and counts the rest.
func (c *changes) String() string {
	names := c.sorted()
	const shown = 3
	s := strings.Join(names[:min(len(names), shown)], ", ")
	if n := len(names) - shown + c.more; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	switch {
	case c.lost && s == "":
		return "files changed (the kernel dropped their names: its queue overflowed)"
	case c.lost:
		s += " (and more: the kernel's queue overflowed)"
	}
	return s + " changed"
}

// burst tells when a burst of changes has settled: quiet after its last
// change, or max after its first when changes never pause.
type burst struct {
	quiet, max  time.Duration
	first, last time.Time
}

// add notes a change at now and says when to act if no other comes.
func (b *burst) add(now time.Time) time.Time {
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	return b.due()
}

func (b *burst) due() time.Time {
	d := b.last.Add(b.quiet)
	if limit := b.first.Add(b.max); limit.Before(d) {
		d = limit
	}
	return d
}

func (b *burst) reset() { b.first, b.last = time.Time{}, time.Time{} }
