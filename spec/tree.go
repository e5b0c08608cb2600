package spec

import (
	"strconv"
	"strings"
)

// node is a YAML or JSON value reduced to what both formats share, with the
// line it came from. Decoding works on nodes so that both formats get the
// same strictness and the same error paths.
type node struct {
	kind  nodeKind
	line  int
	text  string  // scalars: the string value, or the literal of a number or boolean
	items []*node // listNode
	keys  []*node // mapNode: string scalars, in source order
	vals  []*node // mapNode: vals[i] belongs to keys[i]
	// badUTF8 marks a scalar whose source is not valid UTF-8, which a
	// decoder would have replaced: refused, never silently changed.
	badUTF8 bool
}

type nodeKind int

const (
	nullNode nodeKind = iota
	stringNode
	numberNode
	boolNode
	listNode
	mapNode
)

func (k nodeKind) String() string {
	switch k {
	case nullNode:
		return "null"
	case stringNode:
		return "a string"
	case numberNode:
		return "a number"
	case boolNode:
		return "a boolean"
	case listNode:
		return "a list"
	default:
		return "a mapping"
	}
}

// maxDepth bounds nesting well above what a workload needs, so a hostile
// body of ten thousand '[' cannot exhaust the stack.
const maxDepth = 64

// lineOf finds the source line of a field path such as "endpoints[1].port",
// for validation errors found after decoding. When the field itself is not in
// the source (it was defaulted) the line of its nearest ancestor is used.
func (n *node) lineOf(path string) int {
	line, cur := n.line, n
	for path != "" && cur != nil {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			i, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil || cur.kind != listNode || i < 0 || i >= len(cur.items) {
				return line
			}
			cur, path = cur.items[i], path[end+1:]
			line = cur.line
		default:
			k := cur.keyPrefixOf(path)
			if k < 0 {
				return line
			}
			line = cur.keys[k].line
			path = path[len(cur.keys[k].text):]
			cur = cur.vals[k]
		}
	}
	return line
}

// keyPrefixOf returns the index of the longest key that starts path and is
// followed by a separator; longest, because map keys may contain dots.
func (n *node) keyPrefixOf(path string) int {
	best := -1
	if n.kind != mapNode {
		return best
	}
	for i, k := range n.keys {
		rest, ok := strings.CutPrefix(path, k.text)
		if !ok || (rest != "" && rest[0] != '.' && rest[0] != '[') {
			continue
		}
		if best < 0 || len(k.text) > len(n.keys[best].text) {
			best = i
		}
	}
	return best
}
