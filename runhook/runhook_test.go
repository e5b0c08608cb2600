package runhook

import (
	"errors"
	"fmt"
	"testing"
)

// step is a hook that notes each call, and fails its Prestart when told.
type step struct {
	name  string
	fail  bool
	calls *[]string
}

func (s step) note(what string) { *s.calls = append(*s.calls, s.name+"."+what) }

func (s step) Prestart(*Run) error {
	s.note("prestart")
	if s.fail {
		return errors.New(s.name + " failed")
	}
	return nil
}
func (s step) Adopt(*Run)       { s.note("adopt") }
func (s step) Poststart(*Run)   { s.note("poststart") }
func (s step) Exited(*Run)      { s.note("exited") }
func (s step) Destroy(w string) { s.note("destroy " + w) }

func chain(calls *[]string, failing string) Chain {
	var c Chain
	for _, n := range []string{"net", "cgroup", "log"} {
		c = append(c, step{name: n, fail: n == failing, calls: calls})
	}
	return c
}

// TestChainOrder: a chain acquires in order and releases in reverse; a
// Prestart that fails has those before it release, in reverse, and
// leaves those after it unasked.
func TestChainOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(Chain) error
		fail string
		want string
	}{
		{"a run", func(c Chain) error {
			if err := c.Prestart(&Run{}); err != nil {
				return err
			}
			c.Poststart(&Run{})
			c.Exited(&Run{})
			return nil
		}, "", "[net.prestart cgroup.prestart log.prestart net.poststart cgroup.poststart log.poststart log.exited cgroup.exited net.exited]"},
		{"an adopted run", func(c Chain) error { c.Adopt(&Run{}); c.Exited(&Run{}); return nil }, "",
			"[net.adopt cgroup.adopt log.adopt log.exited cgroup.exited net.exited]"},
		{"a failed prestart", func(c Chain) error { return c.Prestart(&Run{}) }, "log",
			"[net.prestart cgroup.prestart log.prestart cgroup.exited net.exited]"},
		{"the first fails", func(c Chain) error { return c.Prestart(&Run{}) }, "net", "[net.prestart]"},
		{"a removal", func(c Chain) error { c.Destroy("web"); return nil }, "",
			"[log.destroy web cgroup.destroy web net.destroy web]"},
	} {
		var calls []string
		err := c.do(chain(&calls, c.fail))
		if (err != nil) != (c.fail != "") || fmt.Sprint(calls) != c.want {
			t.Errorf("%s: %v, calls %v; want %s", c.name, err, calls, c.want)
		}
	}
	if err := (Chain{}).Prestart(&Run{}); err != nil {
		t.Fatal(err)
	}
}
