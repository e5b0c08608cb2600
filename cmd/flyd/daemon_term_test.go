package main

import (
	"slices"
	"testing"
)

// TestTermHidden: the daemon program is started with TERM=dumb and the
// caller's TERM (none as "") where it puts it back; the rest of the
// environment as it was, and a FLYD_TERM of the caller's own dropped.
func TestTermHidden(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"A=1", "TERM=xterm-256color", "B=2"}, []string{"A=1", "B=2", "TERM=dumb", "FLYD_TERM=xterm-256color"}},
		{[]string{"A=1", "FLYD_TERM=old"}, []string{"A=1", "TERM=dumb", "FLYD_TERM="}},
	} {
		if got := termHidden(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("termHidden(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
