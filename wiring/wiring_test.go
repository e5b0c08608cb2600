package wiring

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// world is a World of workloads given in the test; every address is the
// producer's native one.
type world map[string]Workload

func (w world) Lookup(name string) (Workload, bool) { v, ok := w[name]; return v, ok }
func (w world) All() []Workload {
	out := make([]Workload, 0, len(w))
	for _, v := range w {
		out = append(out, v)
	}
	return out
}
func (w world) Address(c, p *spec.Workload, m status.PortMapping) (string, error) {
	if p.Name == "down" {
		return "", errors.New("out of reach")
	}
	if spec.HTTPBased(m.API) {
		return "http://" + m.Address("native"), nil
	}
	return m.Address("native"), nil
}

func producer(name, module string, eps ...spec.Endpoint) Workload {
	w := &spec.Workload{Name: name, Identity: &spec.Identity{Module: module, Service: name}, Endpoints: eps,
		Configuration: spec.Configurations{"conn": {"url": "pg://" + name}}}
	var ports []status.PortMapping
	for i, e := range eps {
		port := 5000 + i
		ports = append(ports, status.PortMapping{Workload: name, Endpoint: e.Name, API: e.API, Port: port,
			Instances: []status.Instance{{Access: "native", Address: "localhost:" + strconv.Itoa(port)}}})
	}
	return Workload{Spec: w, Ports: ports}
}

// TestUses: what a consumer is given of each entry of its `uses`, under
// codefly's names and by seed 000's visibility rules.
func TestUses(t *testing.T) {
	w := world{
		"pg":   producer("pg", "store", spec.Endpoint{Name: "tcp", API: "tcp"}, spec.Endpoint{Name: "admin", API: "http", Visibility: spec.VisibilityPrivate}),
		"api":  producer("api", "web", spec.Endpoint{Name: "http", API: "http"}),
		"down": producer("down", "web", spec.Endpoint{Name: "tcp", API: "tcp"}),
	}
	consumer := func(uses ...string) *spec.Workload {
		return &spec.Workload{Name: "app", Identity: &spec.Identity{Module: "web"}, Uses: uses}
	}
	for _, tt := range []struct {
		name string
		uses []string
		want map[string]string
		err  string
	}{
		{"all it may reach, the private one dropped", []string{"pg"}, map[string]string{
			"CODEFLY__ENDPOINT__STORE__PG__TCP__TCP":               "localhost:5000",
			"CODEFLY__SERVICE_CONFIGURATION__STORE__PG__CONN__URL": "pg://pg"}, ""},
		{"an HTTP endpoint as a URL", []string{"api/http"}, map[string]string{
			"CODEFLY__ENDPOINT__WEB__API__HTTP__HTTP":             "http://localhost:5000",
			"CODEFLY__SERVICE_CONFIGURATION__WEB__API__CONN__URL": "pg://api"}, ""},
		{"a private endpoint named", []string{"pg/admin"}, nil, "private to module"},
		{"no such workload", []string{"nope"}, nil, `"nope" names no workload`},
		{"no such endpoint", []string{"pg/nope"}, nil, `has no endpoint "nope"`},
		{"out of reach", []string{"down"}, nil, "out of reach"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Uses(consumer(tt.uses...), w, false)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Uses = %v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("Uses = %v, %v; want %v", got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestReferences: a ${endpoint:…} reference resolves by seed 000's rule,
// within the consumer's project, and a value keeps its other text.
func TestReferences(t *testing.T) {
	w := world{
		"api":     producer("api", "web", spec.Endpoint{Name: "http", API: "http"}, spec.Endpoint{Name: "grpc", API: "grpc"}, spec.Endpoint{Name: "admin", API: "grpc"}),
		"ci-7.db": producer("ci-7.db", "store", spec.Endpoint{Name: "tcp", API: "tcp"}),
	}
	w["ci-7.db"].Spec.Identity.Service = "db"
	for _, tt := range []struct {
		consumer, value, want, err string
	}{
		{"app", "${endpoint:web/api/http}/v1", "http://localhost:5000/v1", ""},
		{"app", "${endpoint:web/api/http|authority}", "localhost:5000", ""},
		{"app", "${endpoint:web/api/grpc}", "localhost:5001", ""}, // the exact name wins over the API
		{"app", "${endpoint:web/api/http::grpc}", "", "serves http, not grpc"},
		{"app", "${endpoint:store/db/tcp}", "", "no workload is store/db"}, // another project's
		{"ci-7.app", "${endpoint:store/db/tcp}", "localhost:5000", ""},
		{"app", "${endpoint:web/api}", "", "must be ${endpoint:MODULE/SERVICE/ENDPOINT"},
	} {
		c := &spec.Workload{Name: tt.consumer, Identity: &spec.Identity{Module: "web"}, Env: map[string]string{"URL": tt.value}}
		got, err := References(c, w, false)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: err %v; want %q", tt.value, err, tt.err)
		case tt.err == "" && (err != nil || got.Env["URL"] != tt.want):
			t.Errorf("%s: %v, %v; want %q", tt.value, got, err, tt.want)
		case tt.err == "" && c.Env["URL"] != tt.value:
			t.Errorf("%s: the consumer's own spec changed", tt.value)
		}
	}
}
