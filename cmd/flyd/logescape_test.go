package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestEscaper: what would drive a terminal is shown escaped, the rest of a
// log (text, tabs, line ends, UTF-8) as it is, however the log's bytes
// are cut into writes.
func TestEscaper(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain text\tand a tab\n", "plain text\tand a tab\n"},
		{"héllo, 世界 🙂\n", "héllo, 世界 🙂\n"},
		{"\x1b]52;c;ZXZpbA==\x07copied\n", `\x1b]52;c;ZXZpbA==\x07copied` + "\n"},
		{"\x1b]0;title\x1b\\\n", `\x1b]0;title\x1b\` + "\n"},
		{"\x1b[2J\x1b[H\x1b[31mred\x1b[0m\n", `\x1b[2J\x1b[H\x1b[31mred\x1b[0m` + "\n"},
		{"crlf\r\nbar\r50%\rdone\n", "crlf\r\nbar\\x0d50%\\x0ddone\n"},
		{"bell\a nul\x00 del\x7f bs\b\n", `bell\x07 nul\x00 del\x7f bs\x08` + "\n"},
		{"c1 \u009b31m \u0085\n", `c1 \xc2\x9b31m \xc2\x85` + "\n"},
		{"bad \xff\xfe \x9b and cut \xe4\xb8\n", `bad \xff\xfe \x9b and cut \xe4\xb8` + "\n"},
		{"ends cut \xe4\xb8", `ends cut \xe4\xb8`},
		{"ends in \r", `ends in \x0d`},
		{`a\x1b stays`, `a\x1b stays`},
	} {
		// Whole, then cut at every byte into two writes.
		var e escaper
		if got := string(e.escape(nil, []byte(tt.in), true)); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for cut := range len(tt.in) + 1 {
			var e escaper
			out := e.escape(nil, []byte(tt.in[:cut]), false)
			out = e.escape(out, []byte(tt.in[cut:]), true)
			if string(out) != tt.want {
				t.Errorf("escape(%q) cut at %d = %q, want %q", tt.in, cut, out, tt.want)
			}
		}
	}
}

// TestLogPrinterEscapes: a printer that escapes escapes a workload's bytes
// and nothing of its own (the names' colours), one log or several; one
// that does not writes the log's bytes exactly.
func TestLogPrinterEscapes(t *testing.T) {
	at := time.Now()
	recs := []api.LogRecord{{Time: at, Data: []byte("\x1b]0;pwned\x07half \xe4\xb8")}, {Time: at, Data: []byte("\x96 line\n")}, {Time: at, Data: []byte("\x1b[2J")}}
	for _, tt := range []struct {
		names  []string
		escape bool
		want   string
	}{
		{[]string{"a"}, true, `\x1b]0;pwned\x07half 世 line` + "\n" + `\x1b[2J`},
		{[]string{"a"}, false, "\x1b]0;pwned\x07half 世 line\n\x1b[2J"},
		{[]string{"a", "b"}, true, `a | \x1b]0;pwned\x07half 世 line` + "\n" + `a | \x1b[2J` + "\n"},
	} {
		var out bytes.Buffer
		p := newLogPrinter(&out, tt.names, len(tt.names) > 1, false)
		p.escape = tt.escape
		for _, r := range recs {
			if err := p.record(0, r); err != nil {
				t.Fatal(err)
			}
		}
		p.end(0)
		if out.String() != tt.want {
			t.Errorf("%v escape %v: %q, want %q", tt.names, tt.escape, out.String(), tt.want)
		}
	}
}
