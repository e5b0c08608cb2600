package health

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

const (
	// excerptLimit is how much of a command's output an error quotes: the
	// end, where a failing command says why.
	excerptLimit = 256
	// redactMin is the shortest environment value hidden in an excerpt;
	// hiding every "1" or "on" would leave nothing readable.
	redactMin = 4
	redacted  = "[redacted]"
)

// tail keeps the last max bytes written to it, so a chatty command costs
// a fixed amount of memory however much it prints.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// tailFor keeps enough output that any environment value overlapping the
// final excerpt is there whole, and so can be found and hidden.
func tailFor(env []string) *tail {
	longest := 0
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		longest = max(longest, len(v))
	}
	return &tail{max: excerptLimit + longest}
}

// excerpt is the last excerptLimit bytes of out, trimmed, valid UTF-8,
// with every value of env (of redactMin bytes or more) hidden: a probe
// that prints its environment, or a secret it was given, must not carry
// it into an error that is logged and returned by the API. A value cut by
// the start of the excerpt is hidden too, which is why out holds more
// than the excerpt (tailFor).
func excerpt(out []byte, env []string) string {
	hidden := make([]bool, len(out))
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		if len(v) < redactMin {
			continue
		}
		for i := 0; ; {
			j := bytes.Index(out[i:], []byte(v))
			if j < 0 {
				break
			}
			for k := i + j; k < i+j+len(v); k++ {
				hidden[k] = true
			}
			i += j + 1
		}
	}
	var b strings.Builder
	for i := max(0, len(out)-excerptLimit); i < len(out); i++ {
		if !hidden[i] {
			b.WriteByte(out[i])
			continue
		}
		b.WriteString(redacted)
		for i+1 < len(out) && hidden[i+1] {
			i++
		}
	}
	s := strings.ToValidUTF8(b.String(), "\uFFFD")
	return strings.TrimSpace(s)
}

// shorten cuts s to at most n bytes on a rune boundary, for text another
// program chose, such as an HTTP status line.
func shorten(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
