package spec

import (
	"fmt"
	"strconv"
)

// FieldError is a problem with one field of a workload. Field is the path
// from the workload's root, such as "endpoints[1].port" or "env.FOO BAR", so
// callers can match on it; Msg never repeats a secret value.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// atLine prefixes err with a source line, keeping any *FieldError reachable
// through errors.As.
func atLine(line int, err error) error {
	if line <= 0 {
		return err
	}
	return fmt.Errorf("line %d: %w", line, err)
}

// Paths are written the way users think of the document: dots between keys,
// brackets around list indexes, map keys verbatim.

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
