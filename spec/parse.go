package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Parse reads workloads from YAML (one or more documents separated by ---,
// each a workload or a list of workloads) or JSON (one object or an array of
// objects); input starting with '{' or '[' is tried as JSON first. Every
// workload comes back with defaults applied and validated. Errors carry the
// source line when it is known, and wrap a *FieldError when they concern a
// field.
func Parse(data []byte) ([]*Workload, error) {
	d, err := ParseAll(data)
	if err != nil {
		return nil, err
	}
	// Nothing is dropped unsaid: what is not a workload is refused.
	if len(d.Docs) > 0 {
		k := d.Docs[0].DocKind()
		return nil, fmt.Errorf("%s document %q: only workloads are read here (`flyd apply` takes %s documents)", k, d.Docs[0].DocName(), k)
	}
	if len(d.Workloads) == 0 {
		return nil, errors.New("no workload found")
	}
	return d.Workloads, nil
}

// readDocuments reads input that looks like JSON as JSON. When that fails
// but the input is valid YAML, such as a flow mapping `{name: x}`, it is
// taken as YAML; otherwise the JSON error is the one that explains it.
func readDocuments(data []byte) ([]*node, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return readYAML(data)
	}
	root, jsonErr := readJSON(data)
	if jsonErr == nil {
		return []*node{root}, nil
	}
	if roots, err := readYAML(data); err == nil {
		return roots, nil
	}
	return nil, jsonErr
}

// ParseFile is Parse of the file's content, with errors prefixed by its path.
func ParseFile(path string) ([]*Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ws, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ws, nil
}

// DecodeJSON reads exactly one workload as a JSON object, with the same
// strictness, defaults and validation as Parse. It reads r to the end;
// callers facing the network should bound r (http.MaxBytesReader). It is
// the API's reader, so it refuses env_file: the files it names are read
// where the spec file is, never by the daemon on a client's word.
func DecodeJSON(r io.Reader) (*Workload, error) {
	root, err := readOneJSON(r)
	if err != nil {
		return nil, err
	}
	w, err := build(root, "")
	if err == nil && len(w.EnvFile) > 0 {
		return nil, atLine(root.lineOf("env_file"), &FieldError{Field: "env_file",
			Msg: "is read by the reader of the spec file (flyd apply), which puts its variables in env: the API takes env"})
	}
	return w, err
}

// readOneJSON reads r to the end as one JSON value.
func readOneJSON(r io.Reader) (*node, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return readJSON(data)
}

// build decodes, defaults and validates one workload, and points validation
// errors at the line of the field they concern.
func build(n *node, dir string) (*Workload, error) {
	w, err := decodeWorkload(n)
	if err != nil {
		return nil, err
	}
	w.SetDefaults()
	w.inDir(dir)
	err = w.Validate()
	if err == nil {
		return w, nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = slices.Clone(joined.Unwrap())
	}
	for i, e := range errs {
		if fe, ok := e.(*FieldError); ok {
			errs[i] = atLine(n.lineOf(fe.Field), fe)
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}
