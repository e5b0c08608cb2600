package registryclient_test

import (
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// TestDrift: a reference in the registry's own export format, against live
// instances: each kind of drift found on its port, and nothing where the
// two agree (several instances of one service on a port included).
func TestDrift(t *testing.T) {
	ref := registry.RenderTOML([]registry.Instance{
		{ID: "a", Name: "pg", Address: "10.0.0.1", Port: 5432, Protocol: "tcp", Metadata: map[string]string{"container": "pg-1"}},
		{ID: "b", Name: "web", Address: "10.0.0.1", Port: 8080, Protocol: "tcp"},
		{ID: "c", Name: "redis", Address: "10.0.0.1", Port: 6379, Protocol: "tcp"},
		{ID: "d", Name: "api", Address: "10.0.0.1", Port: 9000, Protocol: "tcp"},
	})
	reference, err := registryclient.ParseReference(strings.NewReader(ref))
	if err != nil {
		t.Fatal(err)
	}
	live := []registryclient.Instance{
		{Name: "pg", Port: 5432, Metadata: map[string]string{"container": "pg-2"}}, // another container
		{Name: "web", Port: 8080}, {Name: "web", Port: 8080, Tags: []string{"container=w2"}},
		{Name: "api", Port: 9000},
		{Name: "stray", Port: 7000},
		// redis: missing
	}
	owners := make([]registryclient.Owner, len(live))
	for i, in := range live {
		owners[i] = registryclient.OwnerOf(in)
	}
	var got []string
	for _, d := range registryclient.CheckDrift(reference, owners) {
		got = append(got, strings.Join(strings.Fields(d.String()), " "))
	}
	want := []string{
		"owner_mismatch 5432 want pg (container pg-1), got pg (container pg-2)",
		"missing 6379 redis",
		"extra 7000 stray",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := registryclient.CheckDrift([]registryclient.Owner{{Name: "web", Port: 8080}}, owners[1:3]); len(d) != 0 {
		t.Errorf("an agreeing registry: %v; want no drift", d)
	}
	for _, bad := range []string{"[[service]]\nport = 80\n", "[[service]]\nname = \"x\"\nport = 70000\n", "not toml ["} {
		if _, err := registryclient.ParseReference(strings.NewReader(bad)); err == nil {
			t.Errorf("reference %q: accepted", bad)
		}
	}
}
