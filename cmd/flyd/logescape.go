package main

import (
	"unicode/utf8"
)

// escaper makes a log's bytes safe to show on a terminal, as journalctl
// does: a workload's output cannot set the clipboard (OSC 52), retitle
// the window or clear the screen of whoever reads its log. A control
// character (C0, DEL, C1) other than a tab or a newline, a carriage
// return other than one that ends a line, and a byte that is not UTF-8
// are written as \xNN, the bytes they are; the rest, UTF-8 included, as
// it is. What may be the start of a character or of a line's end, split
// between two writes, is held until the next.
type escaper struct {
	held []byte
}

// escape appends b, escaped, to dst; final says nothing follows b, so
// nothing is held.
func (e *escaper) escape(dst, b []byte, final bool) []byte {
	if len(e.held) > 0 {
		b = append(e.held, b...)
		e.held = nil
	}
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\t' || c == '\n':
			dst = append(dst, c)
			i++
		case c == '\r':
			switch {
			case i+1 < len(b) && b[i+1] == '\n':
				dst = append(dst, c)
			case i+1 == len(b) && !final:
				e.held = append(e.held, c)
			default:
				dst = appendHex(dst, c)
			}
			i++
		case c < 0x20 || c == 0x7f:
			dst = appendHex(dst, c)
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			switch {
			case r == utf8.RuneError && n <= 1 && !final && !utf8.FullRune(b[i:]):
				e.held = append(e.held, b[i:]...)
				return dst
			case r == utf8.RuneError && n <= 1:
				dst = appendHex(dst, c)
				n = 1
			case r <= 0x9f: // C1: 8-bit CSI, OSC and the like
				for _, x := range b[i : i+n] {
					dst = appendHex(dst, x)
				}
			default:
				dst = append(dst, b[i:i+n]...)
			}
			i += n
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

func appendHex(dst []byte, c byte) []byte {
	return append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
}
