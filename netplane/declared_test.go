package netplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// reachWorld is a host with two linked networks: ci (pg, app that uses
// it, side that uses nothing, peer's job that uses it), other (c2, which
// uses pg and api), and on the host's network api (uses pg) and cli.
// Every workload runs, its cgroup id its position in the list.
func reachWorld() (World, ReachWorld) {
	ep := func(name string) spec.Endpoint { return spec.Endpoint{Name: name, API: "tcp"} }
	w := World{
		Decls: map[string]Declaration{
			"pg":   {Network: "ci", Endpoints: []spec.Endpoint{ep("tcp"), ep("admin")}},
			"app":  {Network: "ci", Uses: []string{"pg/tcp"}},
			"side": {Network: "ci"},
			"job":  {Network: "ci", Uses: []string{"pg"}},
			"c2":   {Network: "other", Uses: []string{"pg", "api"}},
			"api":  {Network: spec.NetworkHost, Endpoints: []spec.Endpoint{ep("http")}, Uses: []string{"pg"}},
			"cli":  {Network: spec.NetworkHost},
		},
		Links: map[string]string{"ci": "fly-1", "other": "fly-2"},
		Reserved: []netalloc.Reservation{
			{Network: "ci", Workload: "pg", Endpoint: "tcp", Port: 5432},
			{Network: "ci", Workload: "pg", Endpoint: "admin", Port: 9000},
			{Network: spec.NetworkHost, Workload: "pg", Endpoint: "tcp", Port: 15432},
			{Network: spec.NetworkHost, Workload: "api", Endpoint: "http", Port: 8080},
		},
		AppliedBy: func(name string) (uint32, bool) {
			by, ok := map[string]uint32{"job": 1000}[name]
			return by, ok || name != ""
		},
	}
	r := ReachWorld{
		Declared: map[string]bool{},
		Cgroups:  map[string]uint64{"pg": 1, "app": 2, "side": 3, "job": 4, "c2": 5, "api": 6, "cli": 7},
		NS:       map[string]string{"ci": "/run/netns/ci", "other": "/run/netns/other"},
		Addrs: map[string]NetAddrs{
			"ci":    {Inner: netip.MustParseAddr("10.0.0.2"), Gateway: netip.MustParseAddr("10.0.0.1")},
			"other": {Inner: netip.MustParseAddr("10.0.0.6"), Gateway: netip.MustParseAddr("10.0.0.5")},
		},
	}
	return w, r
}

// tablesText is a plan's tables in a line each: namespace, destination,
// the cgroups allowed it.
func tablesText(ts []firewall.ReachTable) string {
	var b strings.Builder
	for _, t := range ts {
		ns := t.NS
		if ns == "" {
			ns = "host"
		}
		for _, d := range t.Local {
			fmt.Fprintf(&b, "%s lo:%d %v\n", ns, d.Port, d.Allowed)
		}
		for _, d := range t.Remote {
			fmt.Fprintf(&b, "%s %v:%d %v\n", ns, d.Addr, d.Port, d.Allowed)
		}
		for _, g := range t.Gateways {
			fmt.Fprintf(&b, "%s gateway %s %v\n", ns, g.Link, g.Addr)
		}
	}
	return b.String()
}

func admitsText(eps []status.ReachEndpoint) string {
	var b strings.Builder
	for _, e := range eps {
		if !e.Declared {
			fmt.Fprintf(&b, "%s/%s off\n", e.Workload, e.Endpoint)
			continue
		}
		fmt.Fprintf(&b, "%s/%s:", e.Workload, e.Endpoint)
		for _, a := range e.Admits {
			fmt.Fprintf(&b, " %s(%s)", a.Workload, a.Why)
			if !a.Running {
				b.WriteString("!")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestDeclaredReach(t *testing.T) {
	// With a port of the host's guarded, the networks reach the host at
	// their gateways alone.
	const gateways = "host gateway fly-1 10.0.0.1\nhost gateway fly-2 10.0.0.5\n"
	openToPeers := map[string]*spec.Policy{"peers-in": {Name: "peers-in", Select: spec.Selector{Workloads: []string{"pg"}},
		Ingress: &[]spec.IngressRule{{From: spec.Peers{Users: true, Peers: true}}}}}
	for _, tt := range []struct {
		name     string
		change   func(w *World, r *ReachWorld)
		policies map[string]*spec.Policy
		tables   string
		admits   string
	}{
		{name: "off everywhere: nothing guarded", tables: "", admits: "api/http off\npg/tcp off\npg/admin off\n"},
		{
			name:   "one isolated network: its loopback, the host at its address and published port, the other network at its gateway",
			change: func(w *World, r *ReachWorld) { r.Declared["ci"] = true },
			// app by pg/tcp, not admin; the peer's job not at all; api
			// from the host (at the network's address and the published
			// port); c2 from the other network, at its gateway and the
			// published port; pg itself at its own published port.
			tables: "host lo:15432 [6]\nhost 10.0.0.2:5432 [6]\nhost 10.0.0.2:9000 [6]\n" + gateways +
				"/run/netns/ci lo:5432 [1 2]\n/run/netns/ci lo:9000 [1]\n/run/netns/ci 10.0.0.1:15432 [1 2]\n" +
				"/run/netns/other 10.0.0.5:15432 [5]\n",
			admits: "api/http off\npg/tcp: pg(itself) api(uses: [pg]) app(uses: [pg/tcp]) c2(uses: [pg])\npg/admin: pg(itself) api(uses: [pg]) c2(uses: [pg])\n",
		},
		{
			name:   "the host's network: loopback, and every network at its gateway",
			change: func(w *World, r *ReachWorld) { r.Declared[spec.NetworkHost] = true },
			tables: "host lo:8080 [6]\n" + gateways + "/run/netns/ci 10.0.0.1:8080 []\n/run/netns/other 10.0.0.5:8080 [5]\n",
			admits: "api/http: api(itself) c2(uses: [api])\npg/tcp off\npg/admin off\n",
		},
		{
			name:     "a policy opens pg to its peers' users",
			change:   func(w *World, r *ReachWorld) { r.Declared["ci"] = true },
			policies: openToPeers,
			tables: "host lo:15432 [6]\nhost 10.0.0.2:5432 [6]\nhost 10.0.0.2:9000 [6]\n" + gateways +
				"/run/netns/ci lo:5432 [1 2 4]\n/run/netns/ci lo:9000 [1 4]\n/run/netns/ci 10.0.0.1:15432 [1 2 4]\n" +
				"/run/netns/other 10.0.0.5:15432 [5]\n",
			admits: "api/http off\n" +
				"pg/tcp: pg(itself) api(uses: [pg]) app(uses: [pg/tcp]) c2(uses: [pg]) job(uses: [pg] (a peer's, opened by policy peers-in))\n" +
				"pg/admin: pg(itself) api(uses: [pg]) c2(uses: [pg]) job(uses: [pg] (a peer's, opened by policy peers-in))\n",
		},
		{
			name: "a consumer not running is listed, and allowed nothing yet",
			change: func(w *World, r *ReachWorld) {
				r.Declared["ci"] = true
				delete(r.Cgroups, "app")
				w.Decls["pg"] = Declaration{Network: "ci", Endpoints: w.Decls["pg"].Endpoints[:1]}
			},
			tables: "host lo:15432 [6]\nhost 10.0.0.2:5432 [6]\n" + gateways +
				"/run/netns/ci lo:5432 [1]\n/run/netns/ci 10.0.0.1:15432 [1]\n/run/netns/other 10.0.0.5:15432 [5]\n",
			admits: "api/http off\npg/tcp: pg(itself) api(uses: [pg]) app(uses: [pg/tcp])! c2(uses: [pg])\n",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, r := reachWorld()
			if tt.change != nil {
				tt.change(&w, &r)
			}
			p := DeclaredReach(tt.policies, w, r)
			if got := tablesText(p.Tables); got != tt.tables {
				t.Errorf("tables:\n%s\nwant:\n%s", got, tt.tables)
			}
			if got := admitsText(p.Endpoints); got != tt.admits {
				t.Errorf("allow-lists:\n%s\nwant:\n%s", got, tt.admits)
			}
			if len(p.Tables) != 3 || p.Tables[0].NS != "" {
				t.Errorf("tables of %d namespaces, the first %q: want the host's and the two networks'", len(p.Tables), p.Tables[0].NS)
			}
		})
	}
	// A refusal's destination names its endpoint.
	w, r := reachWorld()
	r.Declared["ci"] = true
	p := DeclaredReach(nil, w, r)
	for _, tt := range []struct {
		ns   string
		addr string
		port int
		want string
	}{
		{"/run/netns/ci", "", 5432, "pg/tcp"}, {"", "", 15432, "pg/tcp"}, {"", "10.0.0.2", 9000, "pg/admin"},
		{"/run/netns/other", "10.0.0.5", 15432, "pg/tcp"}, {"/run/netns/other", "", 5432, ""},
	} {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		got, ok := p.Target(tt.ns, a, tt.port)
		if s := got.Workload + "/" + got.Endpoint; ok != (tt.want != "") || ok && s != tt.want {
			t.Errorf("Target(%q, %s, %d) = %s, %v; want %q", tt.ns, tt.addr, tt.port, s, ok, tt.want)
		}
	}
}
