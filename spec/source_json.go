package spec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// readJSON reads exactly one JSON value (RFC 8259) into a tree whose every
// value keeps its line and whose duplicate keys stay visible, which
// json.Unmarshal would hide. It scans the bytes itself: the API reads
// every spec of an apply this way, and a token at a time through
// json.Decoder cost more than the rest of an apply's decoding.
func readJSON(data []byte) (*node, error) {
	s := &jsonScanner{data: data, line: 1}
	s.space()
	n, err := s.value(0)
	if err != nil {
		return nil, fmt.Errorf("malformed JSON: line %d: %w", s.line, err)
	}
	s.space()
	if s.pos < len(data) {
		return nil, fmt.Errorf("malformed JSON: line %d: unexpected data after the top-level value", s.line)
	}
	return n, nil
}

type jsonScanner struct {
	data []byte
	pos  int
	line int // of data[pos]
}

var errEnd = errors.New("unexpected end of input")

// space skips white space, counting lines.
func (s *jsonScanner) space() {
	for ; s.pos < len(s.data); s.pos++ {
		switch s.data[s.pos] {
		case '\n':
			s.line++
		case ' ', '\t', '\r':
		default:
			return
		}
	}
}

// unexpected is the error for the byte at pos, looking for what.
func (s *jsonScanner) unexpected(what string) error {
	if s.pos >= len(s.data) {
		return errEnd
	}
	return fmt.Errorf("invalid character %s %s", quoteChar(s.data[s.pos]), what)
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}

// value reads the value at pos, which is not white space.
func (s *jsonScanner) value(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	if s.pos >= len(s.data) {
		return nil, errEnd
	}
	n := &node{line: s.line}
	switch c := s.data[s.pos]; {
	case c == '{':
		n.kind = mapNode
		return n, s.object(n, depth)
	case c == '[':
		n.kind = listNode
		return n, s.array(n, depth)
	case c == '"':
		n.kind = stringNode
		var err error
		n.text, n.badUTF8, err = s.string()
		return n, err
	case c == 't', c == 'f', c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if lit[0] != c {
				continue
			}
			if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
				return nil, s.literalError(lit)
			}
			s.pos += len(lit)
			if lit == "null" {
				n.kind = nullNode
			} else {
				n.kind, n.text = boolNode, lit
			}
			return n, nil
		}
	case c == '-' || ('0' <= c && c <= '9'):
		n.kind = numberNode
		var err error
		n.text, err = s.number()
		return n, err
	}
	return nil, s.unexpected("looking for beginning of value")
}

// literalError points at the first byte at pos that lit does not have.
func (s *jsonScanner) literalError(lit string) error {
	for i := 0; i < len(lit); i++ {
		if s.pos+i >= len(s.data) {
			s.pos += i
			return errEnd
		}
		if s.data[s.pos+i] != lit[i] {
			s.pos += i
			return s.unexpected("in literal " + lit + " (expecting " + quoteChar(lit[i]) + ")")
		}
	}
	return nil
}

func (s *jsonScanner) object(n *node, depth int) error {
	if s.open('}') {
		return nil
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.unexpected("looking for beginning of object key string")
		}
		key := &node{kind: stringNode, line: s.line}
		var err error
		if key.text, key.badUTF8, err = s.string(); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.unexpected("after object key")
		}
		s.pos++
		s.space()
		val, err := s.value(depth + 1)
		if err != nil {
			return err
		}
		n.keys, n.vals = append(n.keys, key), append(n.vals, val)
		if more, err := s.next('}', "after object key:value pair"); !more || err != nil {
			return err
		}
	}
}

func (s *jsonScanner) array(n *node, depth int) error {
	if s.open(']') {
		return nil
	}
	for {
		item, err := s.value(depth + 1)
		if err != nil {
			return err
		}
		n.items = append(n.items, item)
		if more, err := s.next(']', "after array element"); !more || err != nil {
			return err
		}
	}
}

// open steps past a container's opening delimiter, and past its closing
// one when nothing is inside: it says whether the container is empty.
func (s *jsonScanner) open(closing byte) bool {
	s.pos++
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == closing {
		s.pos++
		return true
	}
	return false
}

// next steps past what ends a member: a comma, and then more follows, or
// the container's closing delimiter.
func (s *jsonScanner) next(closing byte, after string) (more bool, err error) {
	s.space()
	if s.pos >= len(s.data) {
		return false, errEnd
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.space()
		return true, nil
	case closing:
		s.pos++
		return false, nil
	}
	return false, s.unexpected(after)
}

// number reads a number's literal: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() (string, error) {
	start := s.pos
	digits := func() int {
		from := s.pos
		for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
			s.pos++
		}
		return s.pos - from
	}
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case digits() == 0:
		return "", s.unexpected("in numeric literal")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return "", s.unexpected("after decimal point in numeric literal")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return "", s.unexpected("in exponent of numeric literal")
		}
	}
	return string(s.data[start:s.pos]), nil
}

// string reads a string at pos (its opening quote) and says whether its
// source is valid UTF-8: a decoder would silently replace what is not,
// and a spec's values are refused rather than changed.
func (s *jsonScanner) string() (text string, badUTF8 bool, err error) {
	s.pos++ // '"'
	start := s.pos
	plain := true // no escape, nothing beyond ASCII: the bytes are the text
	for ; s.pos < len(s.data); s.pos++ {
		c := s.data[s.pos]
		switch {
		case c == '"':
			raw := s.data[start:s.pos]
			s.pos++
			if plain {
				return string(raw), false, nil
			}
			return unquote(raw)
		case c == '\\':
			plain = false
			s.pos++ // what it escapes is checked by unquote; a quote is not an end
			if s.pos < len(s.data) && s.data[s.pos] == 'u' {
				for i := 0; i < 4; i++ {
					if s.pos+1 >= len(s.data) || !isHex(s.data[s.pos+1]) {
						s.pos++
						return "", false, s.unexpected("in \\u hexadecimal character escape")
					}
					s.pos++
				}
				continue
			}
			if s.pos >= len(s.data) {
				return "", false, errEnd
			}
			if !strings.ContainsRune(`"\/bfnrt`, rune(s.data[s.pos])) {
				return "", false, s.unexpected("in string escape code")
			}
		case c < 0x20:
			return "", false, s.unexpected("in string literal")
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return "", false, errEnd
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unquote is the text of a string's source between its quotes, checked
// already by string: escapes decoded, a lone surrogate and invalid UTF-8
// replaced by U+FFFD as encoding/json does.
func unquote(raw []byte) (string, bool, error) {
	var b strings.Builder
	b.Grow(len(raw))
	bad := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r := hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b.WriteRune(r)
			default: // '"', '\\', '/'
				b.WriteByte(e)
			}
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				bad = true
			}
			b.WriteRune(r)
			i += size
		}
	}
	return b.String(), bad, nil
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			r = r<<4 | rune(c-'a'+10)
		}
	}
	return r
}
