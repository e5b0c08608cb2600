package spec

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// example is the contract's example as it reads after parsing.
func example() *Workload {
	return &Workload{
		Name:      "api-server",
		Kind:      KindNative,
		Identity:  &Identity{Workspace: "demo", Module: "api", Service: "server"},
		Command:   []string{"/usr/bin/python3", "-m", "http.server", "${PORT_HTTP}"},
		Workdir:   "/srv/api",
		User:      "www-data",
		Env:       map[string]string{"LOG_LEVEL": "debug"},
		SecretEnv: map[string]string{"DB_PASSWORD": "s3cret"},
		Endpoints: []Endpoint{{Name: "http", API: "http", Port: Port{Mode: PortHashed}}},
		Network:   "host",
		Restart: Restart{Policy: RestartOnFailure, MaxRestarts: 5, Window: dur("1m"),
			Backoff: Backoff{Initial: dur("250ms"), Max: dur("30s")}},
		Stop: Stop{Signal: "SIGTERM", Timeout: dur("10s"), Mode: StopGroup},
		Health: &Health{HTTP: &HTTPCheck{Endpoint: "http", Path: "/", Expect: 200},
			Interval: dur("2s"), Timeout: dur("1s"), Failures: 3},
		Resources: &Resources{MemoryMax: 256 << 20, CPUMax: "0.5", CPUWeight: 100, PidsMax: 512},
		After:     []string{"postgres"},
		Registry: &Registry{Name: "api-server", Tags: []string{"team=core"},
			Metadata: map[string]string{"jet.domain": "api.example.dev"}, TTL: dur("30s")},
	}
}

func TestParseFileExample(t *testing.T) {
	for _, file := range []string{"testdata/api-server.yaml", "testdata/api-server.json"} {
		t.Run(filepath.Ext(file), func(t *testing.T) {
			ws, err := ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != 1 || !reflect.DeepEqual(ws[0], example()) {
				t.Errorf("got %+v\nwant %+v", ws[0], example())
			}
		})
	}
}

func TestParseFileErrorNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(minimal+"prot: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ParseFile(path)
	wantFieldError(t, err, []string{"prot"}, path+": line 3: prot: unknown field")
}

func TestParseSeveral(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		names []string
	}{
		{"yaml documents", "name: a\ncommand: [x]\n---\nname: b\ncommand: [y]\n", []string{"a", "b"}},
		{"empty documents skipped", "---\n---\nname: a\ncommand: [x]\n---\n# nothing\n", []string{"a"}},
		{"yaml list", "- {name: a, command: [x]}\n- {name: b, command: [y]}\n", []string{"a", "b"}},
		{"json object", `{"name": "a", "command": ["x"]}`, []string{"a"}},
		{"json array", "[\n{\"name\": \"a\", \"command\": [\"x\"]},\n{\"name\": \"b\", \"command\": [\"y\"]}\n]", []string{"a", "b"}},
		{"yaml flow mapping", "{name: a, command: [x]}", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := Parse([]byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range ws {
				names = append(names, w.Name)
			}
			if !reflect.DeepEqual(names, tt.names) {
				t.Errorf("names = %q, want %q", names, tt.names)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		fields []string // FieldError paths; nil for errors about the whole input
		want   string   // part of the message
	}{
		{"unknown top-level key", minimal + "prot: 1\n", []string{"prot"}, "line 3: prot: unknown field"},
		{"unknown nested key", minimal + "restart:\n  backoff:\n    inital: 1s\n", []string{"restart.backoff.inital"}, "line 5: restart.backoff.inital: unknown field"},
		{"unknown key in list element", minimal + "endpoints:\n  - {name: a}\n  - {name: b, prot: 80}\n", []string{"endpoints[1].prot"}, "line 5: endpoints[1].prot: unknown field"},
		{"unknown key in json", "{\"name\": \"app\",\n \"command\": [\"/bin/app\"],\n \"health\": {\"tcp\": \"a\", \"intreval\": \"1s\"}}", []string{"health.intreval"}, "line 3: health.intreval: unknown field"},
		{"json field names are exact", minimal + "Name: x\n", []string{"Name"}, "unknown field"},
		{"duplicate key", minimal + "user: a\nuser: b\n", []string{"user"}, "line 4: user: duplicate key"},
		{"duplicate env key", minimal + "env: {A: x, A: y}\n", []string{"env.A"}, "duplicate key"},
		{"string for list", "name: app\ncommand: /bin/app\n", []string{"command"}, "line 2: command: expected a list, got a string"},
		{"list for string", minimal + "user: [a]\n", []string{"user"}, "expected a string, got a list"},
		{"string for mapping", minimal + "restart: always\n", []string{"restart"}, "expected a mapping, got a string"},
		{"string for integer", minimal + "restart: {max_restarts: \"5\"}\n", []string{"restart.max_restarts"}, "expected an integer, got a string"},
		{"fraction for integer", minimal + "resources: {pids_max: 1.5}\n", []string{"resources.pids_max"}, "expected an integer, got 1.5"},
		{"string for bool", minimal + "health: {tcp: a, restart: \"yes\"}\n", []string{"health.restart"}, "expected true or false"},
		{"null in list", "name: app\ncommand: [/bin/app, null]\n", []string{"command[1]"}, "null"},
		{"null env value", minimal + "env: {A: }\n", []string{"env.A"}, "null"},
		{"bare number duration", minimal + "stop: {timeout: 10}\n", []string{"stop.timeout"}, "add one"},
		{"json bare number duration", `{"name": "app", "command": ["x"], "restart": {"window": 60}}`, []string{"restart.window"}, "no unit"},
		{"bad size", minimal + "resources: {memory_max: 12XB}\n", []string{"resources.memory_max"}, "invalid size"},
		{"bad port", minimal + "endpoints: [{name: a, port: random}]\n", []string{"endpoints[0].port"}, `got "random"`},
		{"workload not a mapping", "just a string\n", nil, "expected a workload"},
		{"json array of non-objects", `[1]`, nil, "expected a workload"},
		{"same name twice", minimal + "---\n" + minimal, []string{"name"}, `line 4: name: workload "app" is defined more than once`},
		{"nothing", "# only a comment\n", nil, "no workload"},
		{"empty", "", nil, "no workload"},
		{"malformed yaml", "name: app\ncommand: [a\n", nil, "malformed YAML: line"},
		{"malformed yaml indentation", "name: app\n  command: x\n", nil, "malformed YAML: line 2"},
		{"malformed json", "{\"name\": \"app\",\n \"command\": [\"x\"}", nil, "malformed JSON: line 2"},
		{"truncated json", "{\"name\": \"app\",\n", nil, "malformed JSON: line 2: unexpected end of input"},
		{"json trailing data", "{\"name\": \"app\", \"command\": [\"x\"]}\n{", nil, "malformed JSON: line 2: unexpected data"},
		{"unknown yaml tag", minimal + "user: !vault secret\n", nil, "unsupported YAML tag !vault"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e]\n", nil, "too large"},
		{"invalid UTF-8 in a json value", "{\"name\": \"app\", \"command\": [\"x\"],\n \"secret_env\": {\"K\": \"s3\xffcret\"}}", []string{"secret_env.K"}, "line 2: secret_env.K: is not valid UTF-8"},
		{"invalid UTF-8 in a json key", "{\"name\": \"app\", \"command\": [\"x\"], \"env\": {\"K\xc3\": \"v\"}}", []string{"env"}, "env: has a key that is not valid UTF-8"},
		{"invalid UTF-8 in yaml", minimal + "user: \"a\xffb\"\n", nil, "UTF-8"},
		{"deep json", strings.Repeat("[", 1000) + strings.Repeat("]", 1000), nil, "nested too deeply"},
		{"validation error has line", minimal + "endpoints:\n  - name: a\n    port: 70000\n", []string{"endpoints[0].port"}, "line 5: endpoints[0].port: must be between 1 and 65535"},
		{"validation error in map key with dot", minimal + "registry:\n  metadata: {a.b: x}\n  tags: [\"\"]\n", []string{"registry.tags[0]"}, "line 5: registry.tags[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("no error, got %+v", ws)
			}
			wantFieldError(t, err, tt.fields, tt.want)
		})
	}
}

func TestDecodeJSON(t *testing.T) {
	data, err := os.ReadFile("testdata/api-server.json")
	if err != nil {
		t.Fatal(err)
	}
	w, err := DecodeJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w, example()) {
		t.Errorf("got %+v\nwant %+v", w, example())
	}

	tests := []struct {
		name   string
		body   string
		fields []string
		want   string
	}{
		{"unknown field", `{"name": "a", "command": ["x"], "endpoints": [{"name": "h", "prot": 1}]}`, []string{"endpoints[0].prot"}, "unknown field"},
		{"array", `[{"name": "a", "command": ["x"]}]`, nil, "expected a workload"},
		{"yaml", "name: a\ncommand: [x]\n", nil, "malformed JSON"},
		{"invalid", `{"name": "A", "command": ["x"]}`, []string{"name"}, "lowercase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeJSON(strings.NewReader(tt.body))
			wantFieldError(t, err, tt.fields, tt.want)
		})
	}
}

// TestInvalidUTF8NeverEchoed: the refusal of a value that is not UTF-8
// names its field and never holds the value.
func TestInvalidUTF8NeverEchoed(t *testing.T) {
	_, err := DecodeJSON(strings.NewReader("{\"name\": \"app\", \"command\": [\"x\"], \"secret_env\": {\"DB_PASSWORD\": \"hunter2\xff\"}}"))
	if err == nil || !strings.Contains(err.Error(), "secret_env.DB_PASSWORD") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v: want secret_env.DB_PASSWORD named, without its value", err)
	}
}

// TestParseAllNetworks: network documents beside workloads, as strict as
// workloads; Parse, which takes workloads only, says where they go.
func TestParseAllNetworks(t *testing.T) {
	d, err := ParseAll([]byte("kind: network\nname: ci-1\negress: false\n---\n" + minimal))
	if err != nil {
		t.Fatal(err)
	}
	if len(DocsOf[*Network](d.Docs)) != 1 || DocsOf[*Network](d.Docs)[0].Name != "ci-1" || DocsOf[*Network](d.Docs)[0].AllowsEgress() || len(d.Workloads) != 1 {
		t.Fatalf("documents %+v", d)
	}
	for src, want := range map[string]string{
		"kind: network\nname: ci-1\negres: false\n":  "line 3: egres: unknown field",
		"kind: network\nname: host\n":                "line 2: name: must be a network name",
		"kind: network\nname: ci-1\negress: maybe\n": "egress",
		"kind: network\nname: ci-1\nreach: some\n":   "line 3: reach: must be \"declared\" or \"off\"",
	} {
		if _, err := ParseAll([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	if d, err := ParseAll([]byte("kind: network\nname: ci-1\nreach: declared\n")); err != nil || !DocsOf[*Network](d.Docs)[0].DeclaredReach() {
		t.Errorf("reach: declared: %+v, %v", d, err)
	}
	if _, err := Parse([]byte("kind: network\nname: ci-1\n")); err == nil || !strings.Contains(err.Error(), "flyd apply") {
		t.Errorf("Parse of a network document: %v", err)
	}
}

func TestParseForkingAndStopExec(t *testing.T) {
	ws, err := Parse([]byte(minimal + "forking: {pid_file: /run/redis/redis.pid}\nstop: {exec: [redis-cli, shutdown]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.Forking == nil || w.Forking.PIDFile != "/run/redis/redis.pid" || w.Forking.Timeout.Duration != DefaultForkingTimeout {
		t.Errorf("forking = %+v, want the pid file and the default timeout", w.Forking)
	}
	if !reflect.DeepEqual(w.Stop.Exec, []string{"redis-cli", "shutdown"}) || w.Stop.Signal != "SIGTERM" {
		t.Errorf("stop = %+v, want the command beside the default signal", w.Stop)
	}
	c := w.Clone()
	c.Stop.Exec[0], c.Forking.PIDFile = "x", "/x"
	if w.Stop.Exec[0] != "redis-cli" || w.Forking.PIDFile != "/run/redis/redis.pid" {
		t.Error("a clone shares the stop command or the forking section")
	}
	if _, err := Parse([]byte(minimal + "forking: {pidfile: /run/r.pid}\n")); err == nil || !strings.Contains(err.Error(), "forking.pidfile: unknown field") {
		t.Errorf("a misspelt key: %v", err)
	}
}
