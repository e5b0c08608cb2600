package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// readJSON reads exactly one JSON value. It walks tokens rather than using
// json.Unmarshal so that every value keeps its line and duplicate keys stay
// visible.
func readJSON(data []byte) (*node, error) {
	r := &jsonReader{dec: json.NewDecoder(bytes.NewReader(data))}
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
	dec      *json.Decoder
	newlines []int // byte offsets of '\n', to turn offsets into lines
}

func (r *jsonReader) lineAt(offset int64) int {
	return sort.SearchInts(r.newlines, int(offset)) + 1
}

// line is the line of the token just read: InputOffset is its end, and no
// JSON token spans lines.
func (r *jsonReader) line() int { return r.lineAt(r.dec.InputOffset()) }

func (r *jsonReader) value(depth int) (*node, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &node{line: r.line()}
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
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		key := &node{kind: stringNode, line: r.line(), text: fmt.Sprint(tok)}
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
