package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestRedacted(t *testing.T) {
	w := example()
	r := w.Redacted()
	if got := r.SecretEnv["DB_PASSWORD"]; got != RedactedValue {
		t.Errorf("redacted secret = %q", got)
	}
	if got := w.SecretEnv["DB_PASSWORD"]; got != "s3cret" {
		t.Errorf("Redacted changed the original: %q", got)
	}
	b, _ := json.Marshal(r)
	if bytes.Contains(b, []byte("s3cret")) {
		t.Errorf("redacted JSON shows the secret: %s", b)
	}
	r.SecretEnv = nil
	if !reflect.DeepEqual(r, func() *Workload { c := example(); c.SecretEnv = nil; return c }()) {
		t.Error("Redacted changed more than secret values")
	}
	if (*Workload)(nil).Redacted() != nil {
		t.Error("nil.Redacted() != nil")
	}
}

func TestCloneIsDeep(t *testing.T) {
	w := valid()
	c := w.Clone()
	if !reflect.DeepEqual(c, w) {
		t.Fatal("clone differs")
	}
	c.Identity.Service = "x"
	c.Command[0] = "x"
	c.Env["LOG_LEVEL"] = "x"
	c.SecretEnv["DB_PASSWORD"] = "x"
	c.Endpoints[0].Name = "x"
	c.Health.HTTP.Path = "/x"
	c.Resources.PidsMax = 1
	c.After[0] = "x"
	c.Registry.Tags[0] = "x"
	c.Registry.Metadata["jet.domain"] = "x"
	if !reflect.DeepEqual(w, valid()) {
		t.Errorf("changing the clone changed the original: %+v", w)
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"same", minimal, minimal, true},
		{"explicit defaults", minimal, minimal + "kind: native\nnetwork: host\nrestart: {policy: on-failure, max_restarts: 5, window: 60s}\nstop: {signal: TERM, timeout: 10s}\n", true},
		{"key order", "command: [/bin/app]\nname: app\nenv: {A: a, B: b}\n", minimal + "env: {B: b, A: a}\n", true},
		{"empty env", minimal, minimal + "env: {}\n", true},
		{"port forms", minimal + "endpoints: [{name: a, port: 80}]\n", minimal + "endpoints: [{name: a, port: \"80\", api: tcp}]\n", true},
		{"different command", minimal, "name: app\ncommand: [/bin/other]\n", false},
		{"different secret", minimal + "secret_env: {A: x}\n", minimal + "secret_env: {A: y}\n", false},
		{"different window", minimal, minimal + "restart: {window: 2m}\n", false},
		{"endpoint order matters", minimal + "endpoints: [{name: a}, {name: b}]\n", minimal + "endpoints: [{name: b}, {name: a}]\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Equal(parseOne(t, tt.a), parseOne(t, tt.b)); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
		})
	}
	raw := &Workload{Name: "app", Command: []string{"/bin/app"}}
	if !Equal(raw, parseOne(t, minimal)) {
		t.Error("Equal does not apply defaults")
	}
	if raw.Kind != "" {
		t.Error("Equal changed its argument")
	}
	if Equal(raw, nil) || !Equal(nil, nil) {
		t.Error("Equal mishandles nil")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, src := range []string{
		"testdata/api-server.yaml",
		"testdata/api-server.json",
	} {
		ws, err := ParseFile(src)
		if err != nil {
			t.Fatal(err)
		}
		w := ws[0]
		w.Endpoints = append(w.Endpoints, Endpoint{Name: "admin", Port: FixedPort(9000)}, Endpoint{Name: "debug", Port: Port{Mode: PortEphemeral}})
		w.Health.StartPeriod = dur("1m30s")
		w.Restart.MaxRestarts = UnlimitedRestarts
		w.SetDefaults()
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", b, err)
		}
		if !Equal(back, w) || !reflect.DeepEqual(back, w) {
			t.Errorf("round trip changed the workload:\n%s\n%+v", b, back)
		}
		// Plain encoding/json, as an API client would use, agrees too.
		var plain Workload
		if err := json.Unmarshal(b, &plain); err != nil || !Equal(&plain, w) {
			t.Errorf("json.Unmarshal = %+v, %v", plain, err)
		}
	}
}
