package registryclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode"
)

// maxMessage bounds how much of a registry's error message an error quotes.
const maxMessage = 300

// StatusError is an error answer of the registry. It unwraps to the
// sentinel its status means for the call (ErrGone, ErrNotFound,
// ErrUnauthorized, ErrBadRequest, ErrConflict), or to nothing: a 5xx, say, is worth
// retrying, an ErrUnauthorized is not.
type StatusError struct {
	Op         string // register, heartbeat, ...
	StatusCode int
	Message    string // the registry's, shortened, without control characters
	kind       error
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("registry %s: HTTP %d %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.Message != "":
		return s + ": " + e.Message
	case e.kind != nil:
		return s + ": " + e.kind.Error()
	}
	return s
}

func (e *StatusError) Unwrap() error { return e.kind }

func (c *Client) statusError(op string, status int, body []byte, expect map[int]error) error {
	e := &StatusError{Op: op, StatusCode: status, kind: expect[status]}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.kind = ErrUnauthorized
	case http.StatusBadRequest:
		e.kind = ErrBadRequest
	case http.StatusConflict:
		e.kind = ErrConflict
	}
	var eb struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		e.Message = snippet([]byte(eb.Error), c.key)
	} else if len(body) > 0 {
		e.Message = snippet(body, c.key)
	}
	return e
}

// snippet makes text from a registry fit for an error message: short, on
// one line, and without the key even if a registry echoes it back.
func snippet(b []byte, key string) string {
	s := strings.ToValidUTF8(string(b), "?")
	if key != "" {
		s = strings.ReplaceAll(s, key, "[key redacted]")
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxMessage {
		s = string(r[:maxMessage]) + "…"
	}
	return s
}
