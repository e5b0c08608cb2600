package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestExternalEndpoints: a workload of kind external runs nothing and
// stands for a service outside the host (here a server in a namespace of
// the test's, routed like any outside host). Its consumers get its address
// under codefly's names, on the host and in an isolated network, and dial
// it; a reference's |authority drops the URL's scheme; a network without
// a way out is refused at apply, naming it; the registry is not told of
// an address that is not this host's.
func TestExternalEndpoints(t *testing.T) {
	t.Parallel()
	out := makeOutside(t, 231)
	outAddr := out.serve(t, 18082)
	d := startDaemon(t)
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "ext.yaml", fmt.Sprintf(`
name: saas
kind: external
identity: {module: vendor, service: api}
endpoints: [{name: http, location: external, address: "http://%[1]s"}, {name: tcp, location: external, address: "%[1]s"}]
---
name: host-app
uses: [saas]
command: ["@PROG@", "env-then-get", "CODEFLY__ENDPOINT__VENDOR__API__HTTP__HTTP"]
env: {AUTH: "${endpoint:vendor/api/http|authority}"}
restart: {policy: never}
---
name: net-app
network: ci-ext
uses: [saas/http]
command: ["@PROG@", "env-then-get", "CODEFLY__ENDPOINT__VENDOR__API__HTTP__HTTP"]
restart: {policy: never}
`, outAddr)))
	saas := d.get(t, "saas")
	if saas.State != api.StateRunning || saas.PID != 0 || len(saas.Ports) != 2 || saas.Ports[0].Location != "external" {
		t.Errorf("saas: %s pid %d ports %+v; want in force, no process, its two external endpoints", saas.State, saas.PID, saas.Ports)
	}
	for _, name := range []string{"host-app", "net-app"} {
		d.waitState(t, name, api.StateExited)
		logs := d.logs(t, name)
		if !strings.Contains(logs, "CODEFLY__ENDPOINT__VENDOR__API__HTTP__HTTP=http://"+outAddr) || !strings.Contains(logs, "hello from testprog") {
			t.Errorf("%s: %s; want the external URL, dialled", name, logs)
		}
		if w := d.get(t, name); w.LastExit == nil || w.LastExit.Code != 0 {
			t.Errorf("%s exited %+v", name, w.LastExit)
		}
	}
	if logs := d.logs(t, "host-app"); !strings.Contains(logs, "CODEFLY__ENDPOINT__VENDOR__API__TCP__TCP="+outAddr) || !strings.Contains(logs, "AUTH="+outAddr) {
		t.Errorf("host-app: %s; want the tcp endpoint as host:port and the reference's authority", logs)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "sealed.yaml", "kind: network\nname: ci-sealed\negress: false\n"))
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "sealed-app.yaml", "name: sealed-app\nnetwork: ci-sealed\nuses: [saas]\ncommand: [\"@PROG@\", signals]\n"))
	if code != 1 || !strings.Contains(errOut, "network ci-sealed has no way out") {
		t.Errorf("a consumer in a network without egress: exit %d, %s; want refused at apply, naming the network", code, errOut)
	}
	if _, err := d.client.Get(t.Context(), "sealed-app"); err == nil {
		t.Error("the refused consumer exists")
	}
	d.mustCLI(t, "stop", "saas")
	if w := d.get(t, "saas"); w.State != api.StateStopped {
		t.Errorf("saas after stop: %s", w.State)
	}
}
