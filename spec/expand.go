package spec

import (
	"strconv"
	"strings"
)

// Expander gives a document's string value its variables (package
// specload interpolates ${VAR} forms): line and field say where the value
// is, for messages. Its error is reported at that line and field, so it
// should name the variable, never the value.
//
// A value that expand changes is typed by what it became, as if it had
// been written so in YAML: `port: ${PORT}` with PORT=8080 is the number
// 8080, "true" and "false" are booleans, anything else a string. A value
// left as it was keeps its type.
type Expander func(line int, field, value string) (string, error)

// expandValues runs expand over every string value under n, in place.
func expandValues(n *node, path string, expand Expander) error {
	switch n.kind {
	case stringNode:
		if n.badUTF8 || !strings.Contains(n.text, "$") {
			return nil
		}
		out, err := expand(n.line, path, n.text)
		if err != nil {
			return atLine(n.line, &FieldError{Field: path, Msg: err.Error()})
		}
		if out != n.text {
			n.text, n.kind = out, typeOf(out)
		}
	case listNode:
		for i, item := range n.items {
			if err := expandValues(item, indexPath(path, i), expand); err != nil {
				return err
			}
		}
	case mapNode:
		for i, k := range n.keys {
			if err := expandValues(n.vals[i], joinPath(path, k.text), expand); err != nil {
				return err
			}
		}
	}
	return nil
}

// typeOf is the kind YAML would give a plain scalar written as s, among
// the kinds a value can become: a number, a boolean or a string (an empty
// value stays an empty string, never null).
func typeOf(s string) nodeKind {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return boolNode
	case "":
		return stringNode
	}
	if strings.Trim(s, "0123456789+-.eE") != "" || !strings.ContainsAny(s, "0123456789") {
		return stringNode
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return stringNode
	}
	return numberNode
}
