package health

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under the limit", 8, []string{"abc", "de"}, "abcde"},
		{"spills over", 8, []string{"abcdef", "ghij"}, "cdefghij"},
		{"one large write", 4, []string{"ab", "cdefgh"}, "efgh"},
		{"exactly the limit", 4, []string{"abcd"}, "abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &tail{max: tt.max}
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if string(tl.buf) != tt.want {
				t.Fatalf("tail = %q, want %q", tl.buf, tt.want)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("a", 300) + "END"
	secret := "s3cr3t-value"
	// A secret cut by the start of the excerpt: only its end is within
	// the last excerptLimit bytes, and that end must not show either.
	straddling := secret + strings.Repeat("b", excerptLimit-4)
	tests := []struct {
		name  string
		out   string
		env   []string
		want  string
		never string
	}{
		{"trimmed", "  \n hello \n\n", nil, "hello", ""},
		{"the end of long output", long, nil, strings.Repeat("a", excerptLimit-3) + "END", ""},
		{"value hidden", "the key is " + secret + ".", []string{"KEY=" + secret}, "the key is [redacted].", secret},
		{"overlapping values hidden whole", "xx " + secret + " yy", []string{"A=" + secret[:6], "B=" + secret}, "xx [redacted] yy", "value"},
		{"short values stay", "on 1 ok", []string{"A=on", "B=1", "C=ok"}, "on 1 ok", ""},
		{"value cut by the start", straddling, []string{"KEY=" + secret}, "[redacted]" + strings.Repeat("b", excerptLimit-4), "3t"},
		{"invalid UTF-8", "bad \xff byte", nil, "bad \uFFFD byte", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tailFor(tt.env)
			tl.Write([]byte(tt.out))
			got := excerpt(tl.buf, tt.env)
			if got != tt.want {
				t.Fatalf("excerpt = %q, want %q", got, tt.want)
			}
			if tt.never != "" && strings.Contains(got, tt.never) {
				t.Fatalf("excerpt %q contains %q", got, tt.never)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"200 OK", 64, "200 OK"},
		{"500 " + strings.Repeat("x", 100), 8, "500 xxxx…"},
		{"200 héllo", 6, "200 h…"}, // é is two bytes: never cut in half
		{"200 \xff", 64, "200 \uFFFD"},
	}
	for _, tt := range tests {
		if got := shorten(tt.in, tt.n); got != tt.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
