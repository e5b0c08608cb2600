package runhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// step is a hook that notes each call, and fails its Prestart when told.
type step struct {
	name  string
	fail  bool
	calls *[]string
}

func (s step) Name() string     { return s.name }
func (s step) note(what string) { *s.calls = append(*s.calls, s.name+"."+what) }

func (s step) Prestart(context.Context, *Run) error {
	s.note("prestart")
	if s.fail {
		return errors.New("failed")
	}
	return nil
}
func (s step) Adopt(context.Context, *Run)         { s.note("adopt") }
func (s step) Poststart(context.Context, *Run)     { s.note("poststart") }
func (s step) Exited(context.Context, *Run)        { s.note("exited") }
func (s step) Destroy(_ context.Context, w string) { s.note("destroy " + w) }

func chain(calls *[]string, failing string) Chain {
	var c Chain
	for _, n := range []string{"net", "cgroup", "log"} {
		c = append(c, step{name: n, fail: n == failing, calls: calls})
	}
	return c
}

// TestChainOrder: a chain acquires in order and releases in reverse; a
// Prestart that fails has those before it release, in reverse, leaves
// those after it unasked, and is named in the error.
func TestChainOrder(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		do   func(Chain) error
		fail string
		want string
	}{
		{"a run", func(c Chain) error {
			if err := c.Prestart(ctx, &Run{}); err != nil {
				return err
			}
			c.Poststart(ctx, &Run{})
			c.Exited(ctx, &Run{})
			return nil
		}, "", "[net.prestart cgroup.prestart log.prestart net.poststart cgroup.poststart log.poststart log.exited cgroup.exited net.exited]"},
		{"an adopted run", func(c Chain) error { c.Adopt(ctx, &Run{}); c.Exited(ctx, &Run{}); return nil }, "",
			"[net.adopt cgroup.adopt log.adopt log.exited cgroup.exited net.exited]"},
		{"a failed prestart", func(c Chain) error { return c.Prestart(ctx, &Run{}) }, "log",
			"[net.prestart cgroup.prestart log.prestart cgroup.exited net.exited]"},
		{"the first fails", func(c Chain) error { return c.Prestart(ctx, &Run{}) }, "net", "[net.prestart]"},
		{"a removal", func(c Chain) error { c.Destroy(ctx, "web"); return nil }, "",
			"[log.destroy web cgroup.destroy web net.destroy web]"},
	} {
		var calls []string
		err := c.do(chain(&calls, c.fail))
		if (err != nil) != (c.fail != "") || fmt.Sprint(calls) != c.want {
			t.Errorf("%s: %v, calls %v; want %s", c.name, err, calls, c.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), c.fail+": ") {
			t.Errorf("%s: %v does not name the hook %s", c.name, err, c.fail)
		}
	}
	if err := (Chain{}).Prestart(ctx, &Run{}); err != nil {
		t.Fatal(err)
	}
}

// named takes part in no phase.
type named string

func (n named) Name() string { return string(n) }

// TestChainPhases: a hook is asked in the phases it implements alone.
func TestChainPhases(t *testing.T) {
	ctx := context.Background()
	var calls []string
	c := Chain{named("quiet"), step{name: "busy", calls: &calls}, named("still")}
	if err := c.Prestart(ctx, &Run{}); err != nil {
		t.Fatal(err)
	}
	c.Adopt(ctx, &Run{})
	c.Poststart(ctx, &Run{})
	c.Exited(ctx, &Run{})
	c.Destroy(ctx, "w")
	if fmt.Sprint(calls) != "[busy.prestart busy.adopt busy.poststart busy.exited busy.destroy w]" {
		t.Errorf("calls %v", calls)
	}
}

// TestKept: a hook's fields are kept as JSON values by name; what is
// false or null is not kept.
func TestKept(t *testing.T) {
	var k Kept
	k.Set("ready", true)
	from := int64(0)
	k.Set("log_from", &from)
	k.Set("log_pipe", false)
	if len(k) != 2 {
		t.Fatalf("kept %v; want ready and log_from", k)
	}
	var ready bool
	var got *int64
	if !k.Get("ready", &ready) || !ready || !k.Get("log_from", &got) || got == nil || *got != 0 {
		t.Errorf("read back: ready %v, log_from %v", ready, got)
	}
	k.Set("ready", false)
	if k.Get("ready", &ready) || k.Get("log_pipe", &ready) {
		t.Errorf("a false field is kept: %v", k)
	}
}
