package spec

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// decodeWorkload fills a Workload from a node, refusing unknown keys,
// duplicate keys and values of the wrong type. Errors are *FieldError with
// the path, wrapped with the source line.
func decodeWorkload(n *node) (*Workload, error) {
	if n.kind != mapNode {
		return nil, atLine(n.line, fmt.Errorf("expected a workload (a mapping), got %s", n.kind))
	}
	w := new(Workload)
	if err := decodeValue(n, reflect.ValueOf(w).Elem(), ""); err != nil {
		return nil, err
	}
	return w, nil
}

func decodeValue(n *node, v reflect.Value, path string) error {
	if n.badUTF8 {
		return atLine(n.line, &FieldError{Field: path, Msg: "is not valid UTF-8"})
	}
	if sd, ok := v.Addr().Interface().(scalarDecoder); ok {
		if err := sd.decodeScalar(n.kind, n.text); err != nil {
			return atLine(n.line, &FieldError{Field: path, Msg: err.Error()})
		}
		return nil
	}
	if v.Type() == stringListType && n.kind == stringNode {
		v.Set(reflect.ValueOf(StringList{n.text}))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeValue(n, v.Elem(), path)
	case reflect.Struct:
		return decodeStruct(n, v, path)
	case reflect.Slice:
		return decodeSlice(n, v, path)
	case reflect.Map:
		return decodeMap(n, v, path)
	case reflect.String:
		// Numbers and booleans are taken as written, so `cpu_max: 0.5` and
		// `env: {VERBOSE: true}` mean what they look like.
		if n.kind == stringNode || n.kind == numberNode || n.kind == boolNode {
			v.SetString(n.text)
			return nil
		}
	case reflect.Int:
		if n.kind == numberNode {
			i, err := strconv.ParseInt(n.text, 10, 64)
			if err != nil || v.OverflowInt(i) {
				return atLine(n.line, fieldErrorf(path, "expected an integer, got %s", n.text))
			}
			v.SetInt(i)
			return nil
		}
	case reflect.Bool:
		if n.kind == boolNode {
			v.SetBool(strings.EqualFold(n.text, "true"))
			return nil
		}
	default:
		panic("spec: no decoder for " + v.Type().String())
	}
	return typeError(n, v.Type(), path)
}

var stringListType = reflect.TypeFor[StringList]()

func decodeStruct(n *node, v reflect.Value, path string) error {
	if n.kind != mapNode {
		return typeError(n, v.Type(), path)
	}
	fields := jsonFields(v.Type())
	seen := make(map[string]bool, len(n.keys))
	for i, k := range n.keys {
		if k.badUTF8 {
			return badKey(k, path)
		}
		p := joinPath(path, k.text)
		idx, ok := fields[k.text]
		if !ok {
			return atLine(k.line, &FieldError{Field: p, Msg: "unknown field"})
		}
		if seen[k.text] {
			return atLine(k.line, &FieldError{Field: p, Msg: "duplicate key"})
		}
		seen[k.text] = true
		f := v.Field(idx)
		if n.vals[i].kind == nullNode {
			// An explicit null is the same as leaving the field out.
			f.SetZero()
			continue
		}
		if err := decodeValue(n.vals[i], f, p); err != nil {
			return err
		}
	}
	return nil
}

func decodeSlice(n *node, v reflect.Value, path string) error {
	if n.kind != listNode {
		return typeError(n, v.Type(), path)
	}
	s := reflect.MakeSlice(v.Type(), len(n.items), len(n.items))
	for i, item := range n.items {
		p := indexPath(path, i)
		if item.kind == nullNode {
			return atLine(item.line, &FieldError{Field: p, Msg: "null is not allowed in a list"})
		}
		if err := decodeValue(item, s.Index(i), p); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

func decodeMap(n *node, v reflect.Value, path string) error {
	if n.kind != mapNode {
		return typeError(n, v.Type(), path)
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.keys))
	for i, k := range n.keys {
		if k.badUTF8 {
			return badKey(k, path)
		}
		p := joinPath(path, k.text)
		key := reflect.ValueOf(k.text).Convert(v.Type().Key())
		if m.MapIndex(key).IsValid() {
			return atLine(k.line, &FieldError{Field: p, Msg: "duplicate key"})
		}
		if n.vals[i].kind == nullNode {
			return atLine(k.line, &FieldError{Field: p, Msg: "expected a value, got null"})
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if err := decodeValue(n.vals[i], elem, p); err != nil {
			return err
		}
		m.SetMapIndex(key, elem)
	}
	v.Set(m)
	return nil
}

// badKey refuses a key that is not valid UTF-8, naming the mapping it is
// in: the key itself cannot be shown as written.
func badKey(k *node, path string) error {
	return atLine(k.line, &FieldError{Field: cmp.Or(path, "(top level)"), Msg: "has a key that is not valid UTF-8"})
}

// typeError deliberately does not quote the value: under secret_env it
// would be the secret.
func typeError(n *node, t reflect.Type, path string) error {
	want := "a string"
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		want = "a mapping"
	case reflect.Slice:
		want = "a list"
	case reflect.Int:
		want = "an integer"
	case reflect.Bool:
		want = "true or false"
	}
	return atLine(n.line, fieldErrorf(path, "expected %s, got %s", want, n.kind))
}

// structFields holds jsonFields' maps, one per struct type, made once.
var structFields sync.Map // reflect.Type → map[string]int

// jsonFields maps each json tag name of a struct to its field index, so that
// YAML uses the same keys as JSON and nothing else. The map is shared: read
// it only.
func jsonFields(t reflect.Type) map[string]int {
	if m, ok := structFields.Load(t); ok {
		return m.(map[string]int)
	}
	m, _ := structFields.LoadOrStore(t, structFieldsOf(t))
	return m.(map[string]int)
}

func structFieldsOf(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			fields[name] = i
		}
	}
	return fields
}
