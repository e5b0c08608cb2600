package spec

import (
	"bytes"
	"encoding/json"
)

// scalarDecoder is implemented by the types written as a single scalar that
// need parsing of their own. The strict decoder calls it with the node's kind
// so that, for example, a bare YAML number can be told from a quoted one.
type scalarDecoder interface {
	decodeScalar(kind nodeKind, text string) error
}

// unmarshalScalar lets plain json.Unmarshal, used by API clients, parse these
// types exactly like the strict decoder does.
func unmarshalScalar(data []byte, into scalarDecoder) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	switch data[0] {
	case '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		return into.decodeScalar(stringNode, s)
	case 't', 'f':
		return into.decodeScalar(boolNode, string(data))
	case '[':
		return into.decodeScalar(listNode, "")
	case '{':
		return into.decodeScalar(mapNode, "")
	}
	return into.decodeScalar(numberNode, string(data))
}
