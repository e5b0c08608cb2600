package integration

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestEndpointVisibility: with the advertise address on a link to a host
// the test makes, an internal endpoint (the default) is not reachable at
// the advertise address from there, published or on the host's network,
// while the host reaches it on loopback; a public exposed one is, and is
// the only one with a public instance; a private endpoint on the host's
// network is reached from its own module's network and refused to
// another module's.
func TestEndpointVisibility(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	out := makeOutside(t, 221)
	advertise := "198.18.221.1" // the host's end of out's link
	d := startDaemon(t, withArgs("--advertise-address", advertise))
	port := func() int { return freePort(t) }
	pubInner, pubHost, intInner, intHost, hostInt, hostPub, private := port(), port(), port(), port(), port(), port(), port()
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "reach.yaml", fmt.Sprintf(`
name: pub
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, port: %d, publish: %d, visibility: public, exposure: public}]
network: ci-vpub
---
name: int
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, port: %d, publish: %d}]
network: ci-vint
---
name: host-int
command: ["@PROG@", "serve", "[::]:${PORT_HTTP}"]
endpoints: [{name: http, port: %d}]
---
name: host-pub
command: ["@PROG@", "serve", "[::]:${PORT_HTTP}"]
endpoints: [{name: http, port: %d, visibility: public, exposure: public}]
---
name: ledger
identity: {module: billing}
command: ["@PROG@", "serve", "0.0.0.0:${PORT_DB}"]
endpoints: [{name: db, port: %d, visibility: private}]
---
name: invoices
identity: {module: billing}
command: ["@PROG@", "signals"]
network: ci-vbill
---
name: shop
identity: {module: shop}
command: ["@PROG@", "signals"]
network: ci-vshop
`, pubInner, pubHost, intInner, intHost, hostInt, hostPub, private)))
	for _, w := range []string{"pub", "int", "host-int", "host-pub", "ledger", "invoices", "shop"} {
		d.waitState(t, w, api.StateRunning)
	}
	fromOutside := func(addr string) bool {
		t.Helper()
		o, _ := out.get(t, addr)
		return strings.Contains(o, "hello from testprog")
	}
	at := func(host string, p int) string { return host + ":" + strconv.Itoa(p) }
	eventually(t, "the exposed endpoints reached from beyond the host", func() error {
		for _, a := range []string{at(advertise, pubHost), at(advertise, hostPub)} {
			if !fromOutside(a) {
				return fmt.Errorf("%s not reached", a)
			}
		}
		return nil
	})
	for _, a := range []string{at(advertise, intHost), at(advertise, hostInt)} {
		if fromOutside(a) {
			t.Errorf("an internal endpoint was reached at the advertise address %s", a)
		}
	}
	// The same on IPv6, which no network of flyd's has: a server of the
	// host's network on [::] is its internal self there too.
	v6host, v6out := "fd18:221::1", "fd18:221::2"
	for _, args := range [][]string{
		{"addr", "add", v6host + "/64", "dev", out.link, "nodad"},
		{"-n", out.ns, "addr", "add", v6out + "/64", "dev", "foi" + strings.TrimPrefix(out.link, "fot"), "nodad"},
	} {
		if o, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, o)
		}
	}
	v6 := func(p int) string { return "[" + v6host + "]:" + strconv.Itoa(p) }
	eventually(t, "the exposed host endpoint reached over IPv6", func() error {
		if !fromOutside(v6(hostPub)) {
			return fmt.Errorf("%s not reached", v6(hostPub))
		}
		return nil
	})
	if fromOutside(v6(hostInt)) {
		t.Errorf("an internal endpoint was reached over IPv6 at %s", v6(hostInt))
	}
	for _, a := range []string{at("127.0.0.1", intHost), at("127.0.0.1", hostInt), "[::1]:" + strconv.Itoa(hostInt)} {
		if _, err := httpGet(a, "/"); err != nil {
			t.Errorf("the host does not reach the internal endpoint at %s: %v", a, err)
		}
	}

	// Only the exposed endpoints have a public instance, in flyd ports and
	// in the registry.
	var ports []api.PortMapping
	decodeJSON(t, d.mustCLI(t, "ports", "--json"), &ports)
	for _, p := range ports {
		public := ""
		for _, in := range p.Instances {
			if in.Access == "public" {
				public = in.Address
			}
		}
		want := ""
		switch p.Workload {
		case "pub":
			want = at(advertise, pubHost)
		case "host-pub":
			want = at(advertise, hostPub)
		}
		if public != want {
			t.Errorf("%s: public instance %q, want %q", p.Workload, public, want)
		}
	}
	eventually(t, "the registry given public addresses for the exposed only", func() error {
		ins, err := d.registered(t)
		if err != nil {
			return err
		}
		for _, in := range ins {
			exposed := in.Metadata["flyd.workload"] == "pub" || in.Metadata["flyd.workload"] == "host-pub"
			if (in.Address == advertise) != exposed {
				return fmt.Errorf("%s registered at %s", in.ID, in.Address)
			}
		}
		return nil
	})

	// Private: its module's network reaches it through the host, another
	// module's does not.
	gw := d.gateways(t)
	reaches := func(network string) bool {
		o, _, code := runCLI(t, d.socket, "exec", "--network", network, "--", d.prog, "get", at(gw[network], private))
		return code == 0 && strings.Contains(o, "hello from testprog")
	}
	if !reaches("ci-vbill") {
		t.Error("the private endpoint refused its own module's network")
	}
	if reaches("ci-vshop") {
		t.Error("the private endpoint let another module's network in")
	}
	d.mustCLI(t, "rm", "pub", "int", "host-int", "host-pub", "ledger", "invoices", "shop")
}
