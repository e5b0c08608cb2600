package wiring

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/authz"
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

// OpenToPeers opens the workloads named "open…" to peers, as a policy
// named after them would.
func (w world) OpenToPeers(name, network string) string {
	if strings.HasPrefix(name, "open") {
		return "peers-" + name
	}
	return ""
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
			got, err := Uses(consumer(tt.uses...), 0, w, false)
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

// TestUsesOwners: a `uses` resolves to its owner's workloads or root's,
// never to another caller's; and a producer's secret configuration reaches
// a consumer that another caller applied only where a policy of root's
// opens it to peers. Root's consumers are given everything of root's.
func TestUsesOwners(t *testing.T) {
	secret := func(p Workload, by uint32) Workload {
		p.Spec.SecretConfiguration = spec.Configurations{"conn": {"password": "X"}}
		p.AppliedBy = by
		return p
	}
	w := world{
		"rsvc":  secret(producer("rsvc", "store", spec.Endpoint{Name: "tcp", API: "tcp"}), 0),
		"opens": secret(producer("opens", "store", spec.Endpoint{Name: "tcp", API: "tcp"}), 0),
		"p1svc": secret(producer("p1svc", "store", spec.Endpoint{Name: "tcp", API: "tcp"}), 1001),
		"p2svc": secret(producer("p2svc", "store", spec.Endpoint{Name: "tcp", API: "tcp"}), 1002),
	}
	pass := func(svc string) string {
		return "CODEFLY__SERVICE_SECRET_CONFIGURATION__STORE__" + strings.ToUpper(svc) + "__CONN__PASSWORD"
	}
	url := func(svc string) string {
		return "CODEFLY__SERVICE_CONFIGURATION__STORE__" + strings.ToUpper(svc) + "__CONN__URL"
	}
	for _, tt := range []struct {
		name   string
		by     uint32
		use    string
		secret bool
		err    string
	}{
		{"root uses root's", 0, "rsvc", true, ""},
		{"a peer uses root's: no secret", 1001, "rsvc", false, ""},
		{"a peer uses root's opened to peers", 1001, "opens", true, ""},
		{"a peer uses its own", 1001, "p1svc", true, ""},
		{"a peer uses another peer's", 1002, "p1svc", false, "uses[0]: p1svc is a workload of uid 1001: a caller other than root names its own workloads and root's"},
		{"root uses a peer's", 0, "p2svc", false, "uses[0]: p2svc is a workload of uid 1002: root's documents name root's workloads alone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &spec.Workload{Name: "app", Uses: []string{tt.use}}
			got, err := Uses(c, tt.by, w, false)
			if tt.err != "" {
				var r *authz.Refusal
				if !errors.As(err, &r) || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "X") {
					t.Errorf("Uses = %v, %v; want a refusal: %s", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got[pass(tt.use)]; ok != tt.secret || got[url(tt.use)] != "pg://"+tt.use {
				t.Errorf("Uses = %v; want the secret given %v, the public configuration given", got, tt.secret)
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
