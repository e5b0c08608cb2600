package spec

import (
	"strings"
	"testing"
)

// TestConfigurations: a workload's configurations parse, strictly; their
// secrets are redacted as secret_env's are; a name or key that makes no
// variable name, or one set both ways, is refused naming it.
func TestConfigurations(t *testing.T) {
	ws, err := Parse([]byte(`
name: pg
command: [/bin/true]
configuration: {connection: {host: localhost, port: "5432"}}
secret_configuration: {connection: {password: hunter2}}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.Configuration["connection"]["host"] != "localhost" || w.SecretConfiguration["connection"]["password"] != "hunter2" {
		t.Fatalf("parsed %+v, %+v", w.Configuration, w.SecretConfiguration)
	}
	if r := w.Redacted(); r.SecretConfiguration["connection"]["password"] != RedactedValue || w.SecretConfiguration["connection"]["password"] != "hunter2" {
		t.Errorf("redacted %v, original %v", r.SecretConfiguration, w.SecretConfiguration)
	}
	for doc, want := range map[string]string{
		"configuration: {\"a b\": {k: v}}\n":                                `configuration.a b`,
		"configuration: {db: {\"k.x\": v}}\n":                               `configuration.db.k.x`,
		"configuration: {db: {k: v}}\nsecret_configuration: {db: {k: w}}\n": "is also set in configuration",
		"configuration: {db: {k: [v]}}\n":                                   "configuration.db.k",
	} {
		_, err := Parse([]byte("name: x\ncommand: [/bin/true]\n" + doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want refused naming %s", doc, err, want)
		}
	}
}
