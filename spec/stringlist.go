package spec

import (
	"bytes"
	"encoding/json"
	"errors"
)

// StringList is a list of strings that may also be written as one string,
// as `env_file: app.env` for `env_file: [app.env]`.
type StringList []string

// UnmarshalJSON takes a string or a list of strings, as the strict decoder
// does.
func (s *StringList) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		*s = StringList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New("expected a string or a list of strings")
	}
	*s = list
	return nil
}
