package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// upper is an Expander that upper-cases what it is given, and turns "$N"
// into 8080, "$T" into true and "$E" into "", to see values retyped, and
// "$BAD" into an error.
func upper(line int, field, v string) (string, error) {
	switch v {
	case "$N":
		return "8080", nil
	case "$T":
		return "true", nil
	case "${net}":
		return "net", nil
	case "$E":
		return "", nil
	case "$BAD":
		return "", errors.New("variable BAD is required")
	}
	return strings.ToUpper(v), nil
}

func TestParseAllExpanded(t *testing.T) {
	doc := "name: app\ncommand: [/bin/app, $arg, plain]\nenv: {K: $v, PLAIN: x}\n" +
		"endpoints: [{name: http, port: $N}]\nresources: {pids_max: \"$N\"}\n" +
		"registry: {metadata: {$key: $E}}\n---\nkind: network\nname: ${net}\negress: $T\n"
	var fields []string
	d, err := ParseAllExpanded([]byte(doc), func(line int, field, v string) (string, error) {
		fields = append(fields, field)
		return upper(line, field, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	w := d.Workloads[0]
	if want := []string{"/bin/app", "$ARG", "plain"}; !reflect.DeepEqual(w.Command, want) {
		t.Errorf("command %q, want %q", w.Command, want)
	}
	if want := map[string]string{"K": "$V", "PLAIN": "x"}; !reflect.DeepEqual(w.Env, want) {
		t.Errorf("env %v, want %v", w.Env, want)
	}
	// A value that became a number is one, quoted or not; keys stay.
	if w.Endpoints[0].Port != FixedPort(8080) || w.Resources.PidsMax != 8080 {
		t.Errorf("port %v, pids_max %d: want 8080 both", w.Endpoints[0].Port, w.Resources.PidsMax)
	}
	if v, ok := w.Registry.Metadata["$key"]; !ok || v != "" {
		t.Errorf("metadata %v, want $key kept with an empty value", w.Registry.Metadata)
	}
	if n := DocsOf[*Network](d.Docs)[0]; n.Name != "net" || n.Egress == nil || !*n.Egress {
		t.Errorf("network %+v, want net with egress true", n)
	}
	// Only values holding a '$' are given to the expander.
	if want := []string{"command[1]", "env.K", "endpoints[0].port", "resources.pids_max", "registry.metadata.$key", "name", "egress"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %q, want %q", fields, want)
	}
}

func TestParseAllExpandedErrors(t *testing.T) {
	_, err := ParseAllExpanded([]byte("name: app\ncommand: [/bin/app]\nsecret_env: {PW: $BAD}\n"), upper)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "secret_env.PW" || !strings.HasPrefix(err.Error(), "line 3: ") ||
		!strings.Contains(err.Error(), "variable BAD is required") {
		t.Errorf("error %v, want line 3, secret_env.PW, the expander's message", err)
	}
	// A value that became a string where a number is wanted is refused
	// as a written one would be, without the value.
	_, err = ParseAllExpanded([]byte("name: app\ncommand: [/bin/app]\nresources: {pids_max: $x}\n"), upper)
	if err == nil || !strings.Contains(err.Error(), "resources.pids_max: expected an integer, got a string") {
		t.Errorf("error %v", err)
	}
}

func TestTypeOf(t *testing.T) {
	for s, want := range map[string]nodeKind{
		"8080": numberNode, "-1": numberNode, "0.5": numberNode, "1e3": numberNode,
		"true": boolNode, "False": boolNode, "": stringNode, "yes": stringNode,
		"0x10": stringNode, "1_000": stringNode, "+": stringNode, "1-2": stringNode, "e": stringNode,
		"10s": stringNode, "NaN": stringNode,
	} {
		if got := typeOf(s); got != want {
			t.Errorf("typeOf(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEnvFileAndProfilesDecode(t *testing.T) {
	for _, doc := range []string{
		minimal + "env_file: a.env\nprofiles: [debug]\n",
		`{"name": "app", "command": ["/bin/app"], "env_file": "a.env", "profiles": ["debug"]}`,
	} {
		d, err := ParseAll([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		w := d.Workloads[0]
		if !reflect.DeepEqual(w.EnvFile, StringList{"a.env"}) || !reflect.DeepEqual(w.Profiles, []string{"debug"}) {
			t.Errorf("env_file %q profiles %q", w.EnvFile, w.Profiles)
		}
	}
	d, err := ParseAll([]byte(minimal + "env_file: [a.env, b.env]\n"))
	if err != nil || !reflect.DeepEqual(d.Workloads[0].EnvFile, StringList{"a.env", "b.env"}) {
		t.Errorf("list: %v %v", d, err)
	}
	if _, err := ParseAll([]byte(minimal + "env_file: {a: b}\n")); err == nil || !strings.Contains(err.Error(), "env_file: expected a list, got a mapping") {
		t.Errorf("mapping: %v", err)
	}
	var s StringList
	if err := s.UnmarshalJSON([]byte(`"x.env"`)); err != nil || !reflect.DeepEqual(s, StringList{"x.env"}) {
		t.Errorf("UnmarshalJSON string: %q %v", s, err)
	}
	if err := s.UnmarshalJSON([]byte(`["a","b"]`)); err != nil || !reflect.DeepEqual(s, StringList{"a", "b"}) {
		t.Errorf("UnmarshalJSON list: %q %v", s, err)
	}
	if err := s.UnmarshalJSON([]byte(`3`)); err == nil {
		t.Error("UnmarshalJSON took a number")
	}
}

// The API reads workloads with DecodeJSON: env_file is refused there, the
// daemon reads no file on a client's word.
func TestDecodeJSONRefusesEnvFile(t *testing.T) {
	_, err := DecodeJSON(strings.NewReader(`{"name": "app", "command": ["/bin/app"], "env_file": ["/etc/shadow"]}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "env_file" {
		t.Errorf("error %v, want env_file refused", err)
	}
	if _, err := DecodeJSON(strings.NewReader(`{"name": "app", "command": ["/bin/app"], "profiles": ["debug"]}`)); err != nil {
		t.Errorf("profiles: %v", err)
	}
}
