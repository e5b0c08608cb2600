package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/flyd-dev/flyd/spec"
)

// object is one JSON Schema (a subschema, a definition).
type object = map[string]any

// Draft is the JSON Schema draft the schema is written in: draft-07, the
// one every editor's YAML and JSON support reads.
const Draft = "http://json-schema.org/draft-07/schema#"

// File is the schema's file name, in this package's directory.
const File = "flyd.schema.json"

func ref(name string) object { return object{"$ref": "#/definitions/" + name} }

// Generate is the schema of flyd's spec files, as indented JSON, with the
// doc comments of package spec's source in specDir as its descriptions.
func Generate(specDir string) ([]byte, error) {
	docs, err := readDocs(specDir)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: docs, defs: object{}, used: map[string]bool{}}
	g.scalars()
	workload := reflect.TypeFor[spec.Workload]()
	g.structDef(workload, "")
	if err := g.runtimeRules(); err != nil {
		return nil, err
	}
	// A document's `kind` chooses its definition: a document kind's name,
	// or else a workload's (whose kind, if any, is a runtime).
	var doc object = ref(workload.Name())
	kinds := spec.DocKinds()
	for i := len(kinds) - 1; i >= 0; i-- {
		k := kinds[i]
		t := reflect.TypeOf(k.New()).Elem()
		g.structDef(t, k.Name)
		doc = object{
			"if":   object{"type": "object", "required": []string{"kind"}, "properties": object{"kind": object{"const": k.Name}}},
			"then": ref(t.Name()),
			"else": doc,
		}
	}
	var names []string
	for _, k := range kinds {
		names = append(names, k.Name)
	}
	doc["description"] = "A workload, or a document of another kind (" + strings.Join(names, ", ") + ") named by its kind key."
	g.defs["Document"] = doc
	for key := range extras {
		if !g.used[key] {
			return nil, fmt.Errorf("schema: extras names %s, which is no field of package spec's types", key)
		}
	}
	for key := range required {
		if !g.used["required:"+key] {
			return nil, fmt.Errorf("schema: required names %s, which is no type of package spec's documents", key)
		}
	}
	root := object{
		"$schema":     Draft,
		"title":       "flyd spec file",
		"description": "A document of a flyd spec file (flyd apply, flyd up, the workloads directory): one per YAML document (---), or a list of them; JSON is an object or an array.",
		"if":          object{"type": "array"},
		"then":        object{"items": ref("Document")},
		"else":        ref("Document"),
		"definitions": g.defs,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type generator struct {
	docs typeDocs
	defs object
	// used marks the extras and required entries that met their field or
	// type, so that one left behind by a rename is an error.
	used map[string]bool
}

// Patterns of what validation accepts, as ECMA-262 regular expressions.
const (
	label = `[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?`
	full  = label + `(\.` + label + `)?`
	// variable is a value flyd apply interpolates (package specload): any
	// value becomes what its variables make it.
	variable = `\$\{`
	envKey   = `^[A-Za-z_][A-Za-z0-9_]*$`
	confName = `^[A-Za-z0-9][A-Za-z0-9_-]*$`
)

// scalars are the definitions of spec's scalar types, as each one's
// decodeScalar reads it.
func (g *generator) scalars() {
	g.defs["Variable"] = object{"type": "string", "pattern": variable,
		"description": "A value with ${VAR}s, which flyd apply interpolates before the document is read: it is then read as what it became."}
	g.defs["Duration"] = anyOf("A duration: a number with a unit (ns, us, ms, s, m, h), like \"250ms\", \"10s\" or \"1m30s\". A bare number is refused: it would not say its unit.",
		object{"type": "string", "pattern": `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`})
	g.defs["Port"] = anyOf("A port: hashed (stable, from the workload's identity), ephemeral (any free port at each start) or a number.",
		object{"enum": []string{string(spec.PortHashed), string(spec.PortEphemeral)}},
		object{"type": "integer", "minimum": 1, "maximum": 65535},
		object{"type": "string", "pattern": `^[-+]?[0-9]+$`})
	g.defs["Size"] = anyOf("A size in bytes: a number, or a whole number with a suffix Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (powers of 1000), like \"256Mi\".",
		object{"type": "integer", "minimum": 0},
		object{"type": "string", "pattern": `^\+?[0-9]+(Ki|Mi|Gi|Ti|K|M|G|T)?$`})
	var kinds []string
	for _, k := range spec.Kinds {
		kinds = append(kinds, string(k))
	}
	g.defs["Kind"] = anyOf("The workload's runtime: "+strings.Join(kinds, ", ")+" (native when left out).", enum(kinds...))
	g.defs["Signal"] = signalSchema()
	conf := object{"type": "object", "propertyNames": object{"pattern": confName},
		"additionalProperties": scalarString()}
	g.defs["Configurations"] = object{"type": "object", "propertyNames": object{"pattern": confName},
		"additionalProperties": conf,
		"description":          "Configurations by name (letters, digits, '_' and '-'), each a mapping of keys (the same) to values."}
}

// anyOf is the schema of a scalar that is one of forms, or a variable.
func anyOf(description string, forms ...object) object {
	alts := make([]any, 0, len(forms)+1)
	for _, f := range forms {
		alts = append(alts, f)
	}
	alts = append(alts, ref("Variable"))
	o := object{"anyOf": alts}
	if description != "" {
		o["description"] = description
	}
	return o
}

// enum is the schema of one of values; the empty string is among them, as
// a field left empty takes its default.
func enum(values ...string) object {
	return object{"enum": append(slices.Clone(values), "")}
}

// scalarString is a string field's schema: the decoder takes a number or
// a boolean as written.
func scalarString() object { return object{"type": []string{"string", "number", "boolean"}} }

// patterned is a string field that validation holds to a pattern.
func patterned(pattern string) object {
	return anyOf("", object{"type": []string{"string", "number", "boolean"}, "pattern": pattern})
}

// typeSchema is the schema of a value of t, as spec's decoder reads it.
func (g *generator) typeSchema(t reflect.Type) object {
	switch t {
	case reflect.TypeFor[spec.Duration]():
		return ref("Duration")
	case reflect.TypeFor[spec.Port]():
		return ref("Port")
	case reflect.TypeFor[spec.Size]():
		return ref("Size")
	case reflect.TypeFor[spec.Kind]():
		return ref("Kind")
	case reflect.TypeFor[spec.Configurations]():
		return ref("Configurations")
	case reflect.TypeFor[spec.StringList]():
		return object{"anyOf": []any{scalarString(), object{"type": "array", "items": scalarString()}}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typeSchema(t.Elem())
	case reflect.Struct:
		g.structDef(t, "")
		return ref(t.Name())
	case reflect.Slice:
		return object{"type": "array", "items": g.typeSchema(t.Elem())}
	case reflect.Map:
		return object{"type": "object", "additionalProperties": g.typeSchema(t.Elem())}
	case reflect.String:
		return scalarString()
	case reflect.Int:
		return anyOf("", object{"type": "integer"})
	case reflect.Bool:
		return anyOf("", object{"type": "boolean"})
	}
	panic("schema: no schema for " + t.String())
}

// structDef defines t's schema under its name: a mapping of its json
// keys and no other. kindConst, for a document kind, is its kind key's
// only value.
func (g *generator) structDef(t reflect.Type, kindConst string) {
	name := t.Name()
	if _, ok := g.defs[name]; ok {
		return
	}
	g.defs[name] = nil // taken, against recursion
	props := object{}
	req := required[name]
	if req != nil {
		g.used["required:"+name] = true
	}
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		var s object
		switch x, ok := extras[name+"."+key]; {
		case key == "kind" && kindConst != "":
			s = object{"const": kindConst}
			req = append(slices.Clone(req), "kind")
		case ok:
			g.used[name+"."+key] = true
			s = x(g, f.Type)
		default:
			s = g.typeSchema(f.Type)
		}
		if !slices.Contains(req, key) {
			s = nullable(s)
		}
		props[key] = describe(s, g.docs.field(name, f.Name))
	}
	def := object{"type": "object", "properties": props, "additionalProperties": false}
	if len(req) > 0 {
		sorted := slices.Clone(req)
		sort.Strings(sorted)
		def["required"] = sorted
	}
	if d := g.docs.typ(name); d != "" {
		def["description"] = d
	}
	g.defs[name] = def
}

// nullable admits null too: an explicit null is the field left out.
func nullable(s object) object {
	return object{"anyOf": []any{s, object{"type": "null"}}}
}

// describe puts a description on s, beside its $ref in an allOf, where
// draft-07 would ignore it.
func describe(s object, d string) object {
	if d == "" {
		return s
	}
	if _, ok := s["$ref"]; ok {
		return object{"allOf": []any{s}, "description": d}
	}
	c := make(object, len(s)+1)
	for k, v := range s {
		c[k] = v
	}
	c["description"] = d
	return c
}

// runtimeRules are the workload's rules that the runtime table (spec.Kinds,
// spec.RuntimeOf) makes: a runtime's section is for its kind alone, and
// required by it when validation says so; a command is required unless
// the runtime brings one or runs nothing.
func (g *generator) runtimeRules() error {
	kindIs := func(values ...string) object {
		return object{"required": []string{"kind"}, "properties": object{"kind": object{"anyOf": []any{object{"enum": values}, ref("Variable")}}}}
	}
	var rules []any
	var noCommand []string
	for _, k := range spec.Kinds {
		rt, _ := spec.RuntimeOf(k)
		if rt.ImageCommand || rt.RunsNothing {
			noCommand = append(noCommand, string(k))
		}
		if rt.Section == "" {
			continue
		}
		rules = append(rules, object{
			"if":   object{"required": []string{rt.Section}, "properties": object{rt.Section: object{"type": "object"}}},
			"then": kindIs(string(k)),
		})
		need, err := sectionRequired(k, rt.Section)
		if err != nil {
			return err
		}
		if need {
			rules = append(rules, object{
				"if":   object{"required": []string{"kind"}, "properties": object{"kind": object{"const": string(k)}}},
				"then": object{"required": []string{rt.Section}},
			})
		}
	}
	rules = append(rules, object{"if": kindIs(noCommand...), "else": object{"required": []string{"command"}}})
	g.defs["Workload"].(object)["allOf"] = rules
	return nil
}

// sectionRequired asks the parser whether a workload of kind k without
// its section is refused for the section's sake.
func sectionRequired(k spec.Kind, section string) (bool, error) {
	probe := fmt.Sprintf(`{"name": "probe", "kind": %q, "command": ["probe"]}`, k)
	_, err := spec.ParseAll([]byte(probe))
	if err == nil {
		return false, nil
	}
	var fe *spec.FieldError
	if errors.As(err, &fe) && (fe.Field == section || strings.HasPrefix(fe.Field, section+".")) {
		return true, nil
	}
	return false, fmt.Errorf("schema: a workload of kind %s without %s: %w", k, section, err)
}
