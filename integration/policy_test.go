package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// TestPolicies: an ingress allow-list on a network admits the network it
// names and refuses another, through the same published port; an egress
// allow-list to one address and port admits that and refuses the rest;
// removing a policy removes its rules and nothing else; a restarted
// daemon puts the policies in force again; a malformed CIDR is refused at
// apply, naming the field. Every address is on this machine.
func TestPolicies(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	out := makeOutside(t, 211)
	open := out.serve(t, 18091)
	closed := out.serve(t, 18092)
	d := startDaemon(t)
	inner, published := freePort(t), freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "nets.yaml", fmt.Sprintf(`
name: db
command: ["@PROG@", "serve", "0.0.0.0:${PORT_SQL}"]
endpoints: [{name: sql, api: tcp, port: %d, publish: %d}]
health: {tcp: sql, interval: 100ms, timeout: 1s, failures: 1}
network: ci-db
---
name: web
command: ["@PROG@", "signals"]
network: ci-web
---
name: lab
command: ["@PROG@", "signals"]
network: ci-lab
`, inner, published)))
	db := d.waitState(t, "db", api.StateRunning)
	d.waitState(t, "web", api.StateRunning)
	d.waitState(t, "lab", api.StateRunning)
	gw := d.gateways(t)
	reaches := func(network, addr string) bool {
		t.Helper()
		o, _, code := runCLI(t, d.socket, "exec", "--network", network, "--", d.prog, "get", addr)
		return code == 0 && strings.Contains(o, "hello from testprog") || strings.Contains(o, fmt.Sprintf("pid=%d", db.PID))
	}
	toDB := func(network string) string { return gw[network] + ":" + strconv.Itoa(published) }
	for _, n := range []string{"ci-web", "ci-lab"} {
		eventually(t, n+" reaching db before any policy", func() error {
			if !reaches(n, toDB(n)) {
				return fmt.Errorf("%s does not reach db's published port", n)
			}
			return nil
		})
	}

	policy := d.writeSpec(t, "policies.yaml", fmt.Sprintf(`
kind: policy
name: db-from-web
select: {workloads: [db]}
ingress:
  - from: {networks: [ci-web]}
    ports: [{port: %d}]
---
kind: policy
name: web-out
select: {networks: [ci-web]}
egress:
  - to: {cidrs: [%s/32]}
    ports: [{port: 18091}]
  - to: {workloads: [db]}
`, inner, out.addr))
	if o := d.mustCLI(t, "apply", "-f", policy); o != "policy db-from-web guards ci-db\npolicy web-out guards ci-web\n" {
		t.Errorf("apply printed %q", o)
	}
	if !reaches("ci-web", toDB("ci-web")) {
		t.Error("the ingress allow-list refused the network it names")
	}
	if reaches("ci-lab", toDB("ci-lab")) {
		t.Error("the ingress allow-list let another network in")
	}
	if !reaches("ci-web", open) {
		t.Errorf("the egress allow-list refused %s, which it names", open)
	}
	if reaches("ci-web", closed) {
		t.Errorf("the egress allow-list let ci-web reach %s, at a port it does not name", closed)
	}
	if !reaches("ci-lab", closed) {
		t.Error("a network no policy selects lost its way out")
	}
	var ps []api.Policy
	decodeJSON(t, d.mustCLI(t, "policies", "--json"), &ps)
	if len(ps) != 2 || ps[0].Name != "db-from-web" || len(ps[0].Guards) != 1 || ps[0].Guards[0] != "ci-db" || len(ps[0].Problems) != 0 {
		t.Errorf("policies: %+v", ps)
	}

	// In force again after a crash and a restart, before anything else.
	d.kill(t)
	d = startDaemon(t, inDir(d.dir))
	if reaches("ci-lab", toDB("ci-lab")) {
		t.Error("after a daemon restart, the ingress allow-list is no longer in force")
	}
	if !reaches("ci-web", toDB("ci-web")) {
		t.Error("after a daemon restart, the allowed network is refused")
	}

	// Removing one removes its rules, and nothing else.
	d.mustCLI(t, "policies", "rm", "db-from-web")
	if !reaches("ci-lab", toDB("ci-lab")) {
		t.Error("the removed policy still refuses ci-lab")
	}
	if reaches("ci-web", closed) {
		t.Error("removing one policy removed another's rules")
	}

	// Derived from the declared dependencies: who uses db reaches it, at
	// its endpoint's port, and no one else.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "users.yaml", "kind: policy\nname: db-users\nselect: {workloads: [db]}\ningress: [{from: {users: true}}]\n"))
	if reaches("ci-lab", toDB("ci-lab")) {
		t.Error("a workload that does not use db reached it under a derived allow-list")
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "lab-uses.yaml", "name: lab\ncommand: [\"@PROG@\", signals]\nnetwork: ci-lab\nuses: [db]\n"))
	d.waitState(t, "lab", api.StateRunning)
	if !reaches("ci-lab", toDB("ci-lab")) {
		t.Error("a workload that uses db was refused by the derived allow-list")
	}
	if reaches("ci-web", toDB("ci-web")) {
		t.Error("the derived allow-list let in a workload that does not use db")
	}
	d.mustCLI(t, "policies", "rm", "db-users")

	// A policy cannot lock flyd out: with all ingress denied, the host's
	// health checks still reach db.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "closed.yaml", "kind: policy\nname: db-closed\nselect: {networks: [ci-db]}\ningress: []\n"))
	if reaches("ci-lab", toDB("ci-lab")) {
		t.Error("a policy denying all ingress let ci-lab in")
	}
	before := d.get(t, "db")
	eventually(t, "db's health checks passing under a deny-all ingress", func() error {
		w := d.get(t, "db")
		if w.Healthy == nil || !*w.Healthy || w.PID != before.PID {
			return fmt.Errorf("db healthy %v, pid %d (was %d)", w.Healthy, w.PID, before.PID)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // five checks' worth
	if w := d.get(t, "db"); w.Healthy == nil || !*w.Healthy {
		t.Errorf("db's health checks fail under a deny-all ingress: %+v", w.Healthy)
	}
	d.mustCLI(t, "policies", "rm", "db-closed")

	// Refused at apply, naming the field; nothing of it kept.
	bad := d.writeSpec(t, "bad.yaml", "kind: policy\nname: bad\nselect: {networks: [ci-web]}\negress: [{to: {cidrs: [10.0.0.300/8]}}]\n")
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", bad); code != 1 || !strings.Contains(errOut, "egress[0].to.cidrs[0]") {
		t.Errorf("a malformed CIDR: exit %d, %s", code, errOut)
	}
	// A name of nothing is a warning, not an error: workloads come later.
	later := d.writeSpec(t, "later.yaml", "kind: policy\nname: later\nselect: {workloads: [not-yet]}\ningress: []\n")
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", later); code != 0 || !strings.Contains(errOut, "no workload named not-yet") {
		t.Errorf("a policy selecting nothing yet: exit %d, %s", code, errOut)
	}
	d.mustCLI(t, "policies", "rm", "web-out")
	d.mustCLI(t, "policies", "rm", "later")
	d.mustCLI(t, "rm", "db", "web", "lab")
}
