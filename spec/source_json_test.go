package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// decoderTree reads data as encoding/json's Decoder does, a token at a
// time, into the tree readJSON makes: the reference readJSON is held to.
func decoderTree(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var newlines []int
	for i, b := range data {
		if b == '\n' {
			newlines = append(newlines, i)
		}
	}
	line := func() int { return sort.SearchInts(newlines, int(dec.InputOffset())) + 1 }
	token := func() (json.Token, bool, error) {
		start := dec.InputOffset()
		tok, err := dec.Token()
		return tok, err != nil || utf8.Valid(data[start:dec.InputOffset()]), err
	}
	var value func(depth int) (*node, error)
	value = func(depth int) (*node, error) {
		tok, valid, err := token()
		if err != nil {
			return nil, err
		}
		n := &node{line: line(), badUTF8: !valid}
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
			n.kind = listNode
			if t == '{' {
				n.kind = mapNode
			}
			for dec.More() {
				if n.kind == listNode {
					item, err := value(depth + 1)
					if err != nil {
						return nil, err
					}
					n.items = append(n.items, item)
					continue
				}
				tok, valid, err := token()
				if err != nil {
					return nil, err
				}
				key := &node{kind: stringNode, line: line(), text: fmt.Sprint(tok), badUTF8: !valid}
				val, err := value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, key), append(n.vals, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	n, err := value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the top-level value")
	}
	return n, nil
}

func sameTree(a, b *node) string {
	switch {
	case a.kind != b.kind || a.line != b.line || a.text != b.text || a.badUTF8 != b.badUTF8:
		return fmt.Sprintf("%v line %d %q bad %v, want %v line %d %q bad %v", a.kind, a.line, a.text, a.badUTF8, b.kind, b.line, b.text, b.badUTF8)
	case len(a.items) != len(b.items) || len(a.keys) != len(b.keys):
		return fmt.Sprintf("%d items %d keys, want %d items %d keys (line %d)", len(a.items), len(a.keys), len(b.items), len(b.keys), b.line)
	}
	for i := range a.items {
		if d := sameTree(a.items[i], b.items[i]); d != "" {
			return d
		}
	}
	for i := range a.keys {
		if d := sameTree(a.keys[i], b.keys[i]); d != "" {
			return d
		}
		if d := sameTree(a.vals[i], b.vals[i]); d != "" {
			return d
		}
	}
	return ""
}

// checkAgainstDecoder holds readJSON to encoding/json: the same values
// taken, with the same lines, and the same inputs refused.
func checkAgainstDecoder(t *testing.T, data []byte) {
	t.Helper()
	got, err := readJSON(data)
	want, werr := decoderTree(data)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("%q: readJSON: %v; encoding/json: %v", data, err, werr)
	case err != nil:
		if !strings.HasPrefix(err.Error(), "malformed JSON: line ") {
			t.Fatalf("%q: error %q does not name its line", data, err)
		}
	default:
		if d := sameTree(got, want); d != "" {
			t.Fatalf("%q: %s", data, d)
		}
	}
}

var jsonCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12.5e-3`, `1E+2`, `-`, `01`, `1.`, `1e`, `.5`, `+1`,
	`"a"`, `""`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`,
	`"\u12"`, `"\x"`, "\"tab\there\"", "\"nl\nhere\"", "\"caf\xc3\xa9\"", "\"bad\xff\"", "\"\xe2\x82\"",
	`{"a":1,"a":2}`, "{\n \"name\": \"app\",\n \"command\": [\"x\",\n  \"y\"]\n}", `{"a" 1}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`,
	`{"a":1}x`, `{"a":1} `, " \n\t{ } \n", `{`, `[`, `"abc`, `tru`, `nul`, `fals`, `trux`, `{"a":[{"b":{"c":[null,true]}}]}`,
	`{1:2}`, `[}`, `{]`, "{\"k\xff\":1}", strings.Repeat("[", 70) + strings.Repeat("]", 70), strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat("[", 66) + strings.Repeat("]", 66),
}

func TestReadJSONAsEncodingJSON(t *testing.T) {
	for _, c := range jsonCases {
		checkAgainstDecoder(t, []byte(c))
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstDecoder(t, data)
	}
	w := &Workload{Name: "app", Command: []string{"/bin/app", "é \x01 \u2028"}, Env: map[string]string{"A": "x\"y\\z\n"}}
	w.SetDefaults()
	data, _ := json.MarshalIndent(w, "", "  ")
	checkAgainstDecoder(t, data)
}

func FuzzReadJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkAgainstDecoder)
}
