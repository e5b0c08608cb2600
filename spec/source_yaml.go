package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxYAMLNodes bounds alias expansion: a few anchors referencing each other
// can otherwise describe a document of billions of nodes.
const maxYAMLNodes = 100_000

// readYAML returns the root of every non-empty document in a YAML stream.
func readYAML(data []byte) ([]*node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	budget := maxYAMLNodes
	var docs []*node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		n, err := fromYAML(&doc, 0, &budget)
		if err != nil {
			return nil, err
		}
		if n.kind != nullNode {
			docs = append(docs, n)
		}
	}
}

func fromYAML(y *yaml.Node, depth int, budget *int) (*node, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("line %d: YAML document too large (too many aliases?)", y.Line)
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: YAML nested too deeply", y.Line)
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return &node{kind: nullNode, line: y.Line}, nil
		}
		return fromYAML(y.Content[0], depth, budget)
	case yaml.AliasNode:
		return fromYAML(y.Alias, depth+1, budget)
	case yaml.ScalarNode:
		return yamlScalar(y)
	case yaml.SequenceNode:
		n := &node{kind: listNode, line: y.Line}
		for _, c := range y.Content {
			item, err := fromYAML(c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
		return n, nil
	case yaml.MappingNode:
		n := &node{kind: mapNode, line: y.Line}
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, err := fromYAML(y.Content[i], depth+1, budget)
			if err != nil {
				return nil, err
			}
			if k.kind == listNode || k.kind == mapNode || k.kind == nullNode {
				return nil, fmt.Errorf("line %d: mapping keys must be strings", k.line)
			}
			v, err := fromYAML(y.Content[i+1], depth+1, budget)
			if err != nil {
				return nil, err
			}
			k.kind = stringNode
			n.keys, n.vals = append(n.keys, k), append(n.vals, v)
		}
		return n, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", y.Line)
}

// yamlScalar uses the tag YAML resolved, so that `port: 8080` is a number
// and `port: "8080"` is a string, exactly as in JSON.
func yamlScalar(y *yaml.Node) (*node, error) {
	n := &node{line: y.Line, text: y.Value}
	switch y.ShortTag() {
	case "!!str", "!!timestamp":
		n.kind = stringNode
	case "!!int", "!!float":
		n.kind = numberNode
	case "!!bool":
		n.kind = boolNode
	case "!!null":
		n.kind = nullNode
	default:
		return nil, fmt.Errorf("line %d: unsupported YAML tag %s", y.Line, y.Tag)
	}
	return n, nil
}
