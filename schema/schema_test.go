package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/specload"
)

func TestSchemaFileIsGenerated(t *testing.T) {
	want, err := Generate("../spec")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(File)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("schema/%s is not what package spec's types make: run `go generate ./schema` and commit it", File)
	}
}

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	data, err := os.ReadFile(File)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(File, doc); err != nil {
		return nil, err
	}
	return c.Compile(File)
})

// validate checks a spec file's text against the schema as an editor
// does: each YAML document on its own; JSON is YAML.
func validate(t *testing.T, text string) error {
	t.Helper()
	sch, err := compiled()
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("YAML: %w", err)
		}
		v, err := value(&n)
		if err != nil {
			return err
		}
		if v == nil {
			continue // an empty document, which flyd skips
		}
		if err := sch.Validate(v); err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
	}
}

// value is a YAML node as the values JSON decoding makes, typed by the
// tag YAML resolved as flyd's reader types it (a timestamp is a string).
func value(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return value(n.Content[0])
	case yaml.AliasNode:
		return value(n.Alias)
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, err := value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[n.Content[i].Value] = v
		}
		return out, nil
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		return b, n.Decode(&b)
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		return json.Number(fmt.Sprint(f)), nil
	}
	return nil, fmt.Errorf("line %d: tag %s", n.Line, n.Tag)
}

// parse reads a spec file as flyd apply does: variables interpolated
// (unset ones empty), env_file entries read as empty files.
func parse(text string) error {
	_, err := specload.Parse("test.yaml", []byte(text), specload.Options{
		Vars:        func(name string) (string, bool) { v, ok := testVars[name]; return v, ok },
		Warn:        func(string) {},
		ReadEnvFile: func(string) (map[string]string, error) { return map[string]string{}, nil },
	})
	return err
}

var testVars = map[string]string{"REPLICAS": "3", "PORT": "8080", "KIND": "containerd", "TIMEOUT": "5s"}

// TestSchemaAgreesWithParser holds documents that the parser accepts or
// refuses, and the schema must judge each alike.
func TestSchemaAgreesWithParser(t *testing.T) {
	cases := []struct {
		doc string
		ok  bool
	}{
		{"name: web\ncommand: [sleep, 10]", true},
		{"name: web", false}, // a native workload needs a command
		{"command: [x]", false},
		{"name: Web\ncommand: [x]", false},
		{"name: ci-7.web\ncommand: [x]", true},
		{"name: a.b.c\ncommand: [x]", false},
		{"name: web\ncommand: [x]\nbogus: 1", false},
		{"name: web\ncommand: [x]\nrestart: {backoff: {inital: 1s}}", false},
		{"name: web\ncommand: [x]\nrestart: null\nenv:", true},
		{"name: web\ncommand: [x]\nenv: {VERBOSE: true, N: 3}", true},
		{"name: web\ncommand: [x]\nenv: {1BAD: x}", false},
		{"name: web\ncommand: [x]\nenv: {A: null}", false},
		{"name: web\ncommand: [x]\nenv: {A: [x]}", false},
		{"name: web\ncommand: [x, null]", false},
		{"name: web\ncommand: x", false},
		{"name: web\ncommand: [x]\nenv_file: a.env", true},
		{"name: web\ncommand: [x]\nenv_file: [a.env, b.env]", true},
		// Durations have a unit.
		{"name: web\ncommand: [x]\nstop: {timeout: 5s}", true},
		{"name: web\ncommand: [x]\nstop: {timeout: 1m30s}", true},
		{"name: web\ncommand: [x]\nstop: {timeout: 5}", false},
		{"name: web\ncommand: [x]\nstop: {timeout: \"5\"}", false},
		{"name: web\ncommand: [x]\nstop: {timeout: 5 s}", false},
		{"name: web\ncommand: [x]\nstop: {timeout: [5s]}", false},
		// Ports: hashed, ephemeral or a number, written as one or not.
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: 8080}]", true},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: \"8080\"}]", true},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: ephemeral}]", true},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: hashed}]", true},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: fixed}]", false},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: 70000}]", false},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: true}]", false},
		{"name: web\ncommand: [x]\nendpoints: [{port: 80}]", false},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, api: soap}]", false},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, visibility: everyone}]", false},
		// Sizes.
		{"name: web\ncommand: [x]\nresources: {memory_max: 256Mi, cpu_max: 0.5, pids_max: 10}", true},
		{"name: web\ncommand: [x]\nresources: {memory_max: 1048576}", true},
		{"name: web\ncommand: [x]\nresources: {memory_max: 256MB}", false},
		{"name: web\ncommand: [x]\nresources: {cpu_weight: 20000}", false},
		// Signals.
		{"name: web\ncommand: [x]\nstop: {signal: SIGINT}", true},
		{"name: web\ncommand: [x]\nstop: {signal: int}", true},
		{"name: web\ncommand: [x]\nstop: {signal: 15}", true},
		{"name: web\ncommand: [x]\nstop: {signal: SIGNOPE}", false},
		{"name: web\ncommand: [x]\nstop: {signal: 99}", false},
		{"name: web\ncommand: [x]\nstop: {mode: main}", true},
		{"name: web\ncommand: [x]\nstop: {mode: some}", false},
		{"name: web\ncommand: [x]\nreload: {signal: hup}", true},
		// after and uses.
		{"name: web\ncommand: [x]\nafter: [pg, \"pg2:started\", \"mig:completed\", \"cache:healthy+restart\", \"q+restart\"]", true},
		{"name: web\ncommand: [x]\nafter: [\"pg:ready\"]", false},
		{"name: web\ncommand: [x]\nafter: [\"mig:completed+restart\"]", false},
		{"name: web\ncommand: [x]\nuses: [pg, pg/sql]", true},
		{"name: web\ncommand: [x]\nuses: [pg/sql/x]", false},
		{"name: web\ncommand: [x]\nrestart: {policy: sometimes}", false},
		{"name: web\ncommand: [x]\nrestart: {max_restarts: -1}", true},
		{"name: web\ncommand: [x]\nrestart: {max_restarts: -2}", false},
		{"name: web\ncommand: [x]\nreplicas: 100", false},
		{"name: web\ncommand: [x]\nhealth: {http: {endpoint: http, expect: 99}}\nendpoints: [{name: http}]", false},
		{"name: web\ncommand: [x]\nhealth: {http: {endpoint: http, path: health}}\nendpoints: [{name: http}]", false},
		{"name: web\ncommand: [x]\nhealth: {http: {endpoint: http, path: /health, expect: 204}}\nendpoints: [{name: http}]", true},
		{"name: web\ncommand: [x]\nwatch: [{path: src, action: rebuild}]", false},
		// The runtime table: a section is its kind's, and required by it.
		{"name: web\nkind: nix\ncommand: [x]\nnix: {package: hello}", true},
		{"name: web\nkind: nix\ncommand: [x]", false},
		{"name: web\ncommand: [x]\nnix: {package: hello}", false},
		{"name: web\nkind: containerd\ncontainerd: {image: busybox}", true},
		{"name: web\nkind: containerd", false},
		{"name: web\nkind: podman\ncommand: [x]", false},
		{"name: db\nkind: external\nendpoints: [{name: pg, location: external, address: \"db.example.com:5432\"}]", true},
		// ${VAR}s are read as what they become.
		{"name: web\ncommand: [x]\nreplicas: ${REPLICAS}\nendpoints: [{name: http, port: ephemeral}]", true},
		{"name: web\ncommand: [x]\nendpoints: [{name: http, port: \"${PORT}\"}]", true},
		{"name: web\nkind: ${KIND}\ncontainerd: {image: busybox}", true},
		{"name: web\ncommand: [x]\nstop: {timeout: \"${TIMEOUT}\"}", true},
		// Documents of other kinds, chosen by kind.
		{"kind: network\nname: ci\nreach: declared\negress: false", true},
		{"kind: network\nname: host", false},
		{"kind: network\nname: ci\nreach: open", false},
		{"kind: network\nname: ci\ncommand: [x]", false},
		{"kind: policy\nname: p\nselect: {workloads: [db]}\ningress: [{from: {workloads: [web]}, ports: [{port: 5432}]}]", true},
		{"kind: policy\nname: p\nselect: {workloads: [db]}\ningress: [{from: {workloads: [web]}, ports: [{port: 5432, protocol: sctp}]}]", false},
		{"kind: policy\nname: p\ningress: []", false},
		{"kind: workspace\nname: demo\nconfiguration: {db: {host: pg, port: 5432}}", true},
		{"kind: workspace\nname: demo\nconfiguration: {db: {\"bad key\": x}}", false},
		{"kind: widget\nname: w", false},
		// A stream, and lists of documents.
		{"kind: network\nname: ci\n---\nname: web\nnetwork: ci\ncommand: [x]", true},
		{"- {name: a, command: [x]}\n- {kind: network, name: n}", true},
		{"- {name: a, command: [x]}\n- {kind: network, name: host}", false},
		{`[{"name": "a", "command": ["x"], "stop": {"timeout": "5s"}}]`, true},
		{`{"name": "a", "command": ["x"], "stop": {"timeout": 5}}`, false},
	}
	for _, c := range cases {
		schemaErr, parseErr := validate(t, c.doc), parse(c.doc)
		if (parseErr == nil) != c.ok {
			t.Errorf("%q: the parser says %v; the case says ok=%v", c.doc, parseErr, c.ok)
		}
		if (schemaErr == nil) != c.ok {
			t.Errorf("%q: the schema says %v; the parser says %v", c.doc, schemaErr, parseErr)
		}
	}
}

// The runtime table's sections are each a field of Workload: the schema's
// rules name them.
func TestRuntimeSections(t *testing.T) {
	for _, k := range spec.Kinds {
		rt, _ := spec.RuntimeOf(k)
		if rt.Section == "" {
			continue
		}
		doc := fmt.Sprintf("name: web\nkind: %s\ncommand: [x]\n%s: {}", k, rt.Section)
		if err := validate(t, doc); err != nil && strings.Contains(err.Error(), "additional") {
			t.Errorf("section %s of kind %s is not a workload's key: %v", rt.Section, k, err)
		}
	}
}
