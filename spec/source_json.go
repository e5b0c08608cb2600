package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"
)

// readJSON reads exactly one JSON value. It walks tokens rather than using
// json.Unmarshal so that every value keeps its line and duplicate keys stay
// visible.
func readJSON(data []byte) (*node, error) {
	r := &jsonReader{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	for i, b := range data {
		if b == '\n' {
			r.newlines = append(r.newlines, i)
		}
	}
	n, err := r.value(0)
	if err != nil {
		return nil, r.malformed(err)
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("malformed JSON: line %d: unexpected data after the top-level value", r.line())
	}
	return n, nil
}

type jsonReader struct {
	data     []byte
	dec      *json.Decoder
	newlines []int // byte offsets of '\n', to turn offsets into lines
}

func (r *jsonReader) lineAt(offset int64) int {
	return sort.SearchInts(r.newlines, int(offset)) + 1
}

// line is the line of the token just read: InputOffset is its end, and no
// JSON token spans lines.
func (r *jsonReader) line() int { return r.lineAt(r.dec.InputOffset()) }

// token reads the next token and reports whether its source is valid
// UTF-8: the decoder would silently replace what is not.
func (r *jsonReader) token() (json.Token, bool, error) {
	start := r.dec.InputOffset()
	tok, err := r.dec.Token()
	return tok, err != nil || utf8.Valid(r.data[start:r.dec.InputOffset()]), err
}

func (r *jsonReader) value(depth int) (*node, error) {
	tok, valid, err := r.token()
	if err != nil {
		return nil, err
	}
	n := &node{line: r.line(), badUTF8: !valid}
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	switch t := tok.(type) {
	case nil:
		n.kind = nullNode
	case bool:
		n.kind, n.text = boolNode, fmt.Sprint(t)
	case json.Number:
		n.kind, n.text = numberNode, t.String()
	case string:
		n.kind, n.text = stringNode, t
	case json.Delim:
		err = r.container(n, t, depth)
	}
	return n, err
}

func (r *jsonReader) container(n *node, open json.Delim, depth int) error {
	n.kind = listNode
	if open == '{' {
		n.kind = mapNode
	}
	for r.dec.More() {
		if n.kind == listNode {
			item, err := r.value(depth + 1)
			if err != nil {
				return err
			}
			n.items = append(n.items, item)
			continue
		}
		tok, valid, err := r.token()
		if err != nil {
			return err
		}
		key := &node{kind: stringNode, line: r.line(), text: fmt.Sprint(tok), badUTF8: !valid}
		val, err := r.value(depth + 1)
		if err != nil {
			return err
		}
		n.keys, n.vals = append(n.keys, key), append(n.vals, val)
	}
	_, err := r.dec.Token() // the closing delimiter
	return err
}

func (r *jsonReader) malformed(err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("malformed JSON: line %d: %s", r.lineAt(syntax.Offset), syntax.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: line %d: unexpected end of input", len(r.newlines)+1)
	}
	return fmt.Errorf("malformed JSON: line %d: %v", r.line(), err)
}
