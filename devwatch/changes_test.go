package devwatch

import (
	"strings"
	"testing"
	"time"
)

// TestBurstIsOneAction: changes closer than the quiet period are one
// burst, acted on a quiet period after the last; changes that never pause
// are acted on at the burst's longest wait.
func TestBurstIsOneAction(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := burst{quiet: 300 * time.Millisecond, max: 2 * time.Second}
	var due time.Time
	for i := range 20 { // 20 saves 10 ms apart
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if i > 0 && !now.Before(due) {
			t.Fatalf("save %d at +%s came after the action was due (+%s): two actions", i, now.Sub(t0), due.Sub(t0))
		}
		due = b.add(now)
	}
	if want := t0.Add(190*time.Millisecond + 300*time.Millisecond); !due.Equal(want) {
		t.Errorf("due at +%s, want +%s: a quiet period after the last save", due.Sub(t0), want.Sub(t0))
	}

	b.reset()
	for i := range 100 { // a save every 100 ms for 10 s: never quiet
		due = b.add(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		if due.After(t0.Add(2 * time.Second)) {
			t.Fatalf("due at +%s: a stream of changes waits at most 2s", due.Sub(t0))
		}
	}
}

func TestChangesString(t *testing.T) {
	var c changes
	c.add("b.py")
	if got := c.String(); got != "b.py changed" {
		t.Errorf("%q", got)
	}
	c.add("a.py")
	c.add("b.py")
	for _, n := range []string{"c.py", "d.py", "e.py"} {
		c.add(n)
	}
	if got := c.String(); got != "a.py, b.py, c.py and 2 more changed" {
		t.Errorf("%q", got)
	}
	if got := (&changes{lost: true}).String(); !strings.Contains(got, "overflowed") {
		t.Errorf("%q", got)
	}
}
