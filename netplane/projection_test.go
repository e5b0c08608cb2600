package netplane

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
)

// testWorld is a host with three networks and their workloads: db (ci-db,
// module store, a private endpoint and an internal one), web (ci-web,
// uses db), a confined caller's job (ci-job, uid 1000, uses db), and api on
// the host's network.
func testWorld() World {
	ep := func(name string, vis string) spec.Endpoint {
		return spec.Endpoint{Name: name, API: "tcp", Visibility: vis}
	}
	return World{
		Decls: map[string]Declaration{
			"db":  {Network: "ci-db", Module: "default/store", Endpoints: []spec.Endpoint{ep("pg", ""), ep("admin", spec.VisibilityPrivate)}},
			"web": {Network: "ci-web", Module: "default/web", Uses: []string{"db"}},
			"job": {Network: "ci-job", Module: "uid-1000/job", Uses: []string{"db"}},
			"api": {Network: spec.NetworkHost, Module: "default/api", Endpoints: []spec.Endpoint{ep("http", ""), ep("pub", spec.VisibilityPublic)}},
		},
		Links: map[string]string{"ci-db": "fly-1", "ci-web": "fly-2", "ci-job": "fly-3"},
		Reserved: []netalloc.Reservation{
			{Network: "ci-db", Workload: "db", Endpoint: "admin", Port: 9000},
			{Network: "ci-db", Workload: "db", Endpoint: "pg", Port: 5432},
			{Network: spec.NetworkHost, Workload: "api", Endpoint: "http", Port: 8080},
			{Network: spec.NetworkHost, Workload: "api", Endpoint: "pub", Port: 8443},
		},
		AppliedBy: func(name string) (uint32, bool) {
			by, ok := map[string]uint32{"db": 0, "web": 0, "job": 1000, "api": 0}[name]
			return by, ok
		},
	}
}

// TestReachRulesOfAGroup: a group's own port in its network is guarded
// as its replicas' ports are; its published port, on the host, is not
// the network's.
func TestReachRulesOfAGroup(t *testing.T) {
	w := testWorld()
	w.Decls["q-1"] = Declaration{Network: "ci-db", Module: "default/store", Group: "q",
		Endpoints: []spec.Endpoint{{Name: "admin", API: "tcp", Visibility: spec.VisibilityPrivate}}}
	w.Reserved = append(w.Reserved,
		netalloc.Reservation{Network: "ci-db", Workload: "q", Endpoint: "admin", Port: 9100},
		netalloc.Reservation{Network: "ci-db", Workload: "q-1", Endpoint: "admin", Port: 9101},
		netalloc.Reservation{Network: spec.NetworkHost, Workload: "q", Endpoint: "admin", Port: 19100})
	got := fmt.Sprint(ReachRules(w))
	want := fmt.Sprint([]firewall.Reach{
		{Link: "", Port: 8080},
		{Link: "fly-1", Port: 5432},
		{Link: "fly-1", Port: 9000, Private: true, From: []string{"fly-1"}},
		{Link: "fly-1", Port: 9100, Private: true, From: []string{"fly-1"}},
		{Link: "fly-1", Port: 9101, Private: true, From: []string{"fly-1"}},
	})
	if got != want {
		t.Errorf("reach %s\nwant  %s", got, want)
	}
}

// guardText is a projection's guards in a line each, for comparing.
func guardText(gs []firewall.Guard) string {
	var b strings.Builder
	dir := func(l, name string, as *[]firewall.Allow) {
		if as == nil {
			return
		}
		fmt.Fprintf(&b, "%s %s:", l, name)
		for _, a := range *as {
			fmt.Fprintf(&b, " [%s links=%v cidrs=%v ports=%v]", a.Policy, a.Links, a.CIDRs, a.Ports)
		}
		b.WriteString("\n")
	}
	for _, g := range gs {
		dir(g.Link, "in", g.Ingress)
		dir(g.Link, "out", g.Egress)
	}
	return b.String()
}

// TestProjection: policies × declarations × links come to guards, what
// each policy guards and what of it is not in force, without a kernel.
func TestProjection(t *testing.T) {
	for _, tt := range []struct {
		name, policies string
		guards         string
		selects        map[string][]string
		problems       map[string]string
	}{
		{"networks and ports", "name: p\nselect: {workloads: [db]}\ningress: [{from: {networks: [ci-web]}, ports: [{port: 5432}]}]\n",
			"fly-1 in: [p links=[fly-2] cidrs=[] ports=[{6 5432}]]\n", map[string][]string{"p": {"ci-db"}}, nil},
		{"deny all of a direction", "name: p\nselect: {networks: [ci-web]}\negress: []\n",
			"fly-2 out:\n", map[string][]string{"p": {"ci-web"}}, nil},
		{"ranges", "name: p\nselect: {networks: [ci-web]}\negress: [{to: {cidrs: [192.0.2.0/24]}, ports: [{port: 53, protocol: udp}]}]\n",
			"fly-2 out: [p links=[] cidrs=[192.0.2.0/24] ports=[{17 53}]]\n", nil, nil},
		{"users derived, a confined caller's left out", "name: p\nselect: {workloads: [db]}\ningress: [{from: {users: true}}]\n",
			"fly-1 in: [p links=[fly-2] cidrs=[] ports=[{6 5432} {6 9000}]]\n", nil, nil},
		{"users with peers", "name: p\nselect: {workloads: [db]}\ningress: [{from: {users: true, peers: true}}]\n",
			"fly-1 in: [p links=[fly-2 fly-3] cidrs=[] ports=[{6 5432} {6 9000}]]\n", nil, nil},
		{"names of nothing and of the host's", "name: p\nselect: {workloads: [ghost, api], networks: [ci-none]}\ningress: []\n",
			"", nil, map[string]string{"p": "select: api is on the host's network, which no policy can tell apart from the host|select: network ci-none does not exist (yet)|select: no workload named ghost (yet)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := spec.ParseAll([]byte("kind: policy\n" + tt.policies))
			if err != nil {
				t.Fatal(err)
			}
			pr := Project(map[string]*spec.Policy{spec.DocsOf[*spec.Policy](docs.Docs)[0].Name: spec.DocsOf[*spec.Policy](docs.Docs)[0]}, testWorld())
			if got := guardText(pr.Guards); got != tt.guards {
				t.Errorf("guards:\n%s\nwant:\n%s", got, tt.guards)
			}
			for p, want := range tt.selects {
				if !slices.Equal(pr.Selects[p], want) {
					t.Errorf("%s guards %v, want %v", p, pr.Selects[p], want)
				}
			}
			for p, want := range tt.problems {
				if got := strings.Join(pr.Problems[p], "|"); got != want {
					t.Errorf("%s's problems: %q\nwant %q", p, got, want)
				}
			}
		})
	}
}

// TestReachRules: an internal port is guarded for the host's networks, a
// private one admits its module's networks alone, a public one needs no
// rule.
func TestReachRules(t *testing.T) {
	got := fmt.Sprint(ReachRules(testWorld()))
	want := fmt.Sprint([]firewall.Reach{
		{Link: "", Port: 8080},
		{Link: "fly-1", Port: 5432},
		{Link: "fly-1", Port: 9000, Private: true, From: []string{"fly-1"}},
	})
	if got != want {
		t.Errorf("reach %s\nwant  %s", got, want)
	}
}
