package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/firewall"
)

// outside is a host the test makes: a network namespace with a veth to the
// host on a /30 of 198.18.0.0/15 (set aside for tests), routed by the
// host like any network the host is on. Nothing leaves the machine.
type outside struct {
	ns, addr string
}

func makeOutside(t *testing.T, third int) *outside {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	o := &outside{ns: "flyd-out-" + id, addr: fmt.Sprintf("198.18.%d.2", third)}
	host, peer := "fot"+id, "foi"+id
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", o.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", o.ns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", peer, "netns", o.ns)
	run("addr", "add", fmt.Sprintf("198.18.%d.1/30", third), "dev", host)
	run("link", "set", host, "up")
	run("-n", o.ns, "addr", "add", o.addr+"/30", "dev", peer)
	run("-n", o.ns, "link", "set", peer, "up")
	run("-n", o.ns, "link", "set", "lo", "up")
	return o
}

// serve runs testprog's server inside the outside host until the test ends.
func (o *outside) serve(t *testing.T, port int) string {
	t.Helper()
	addr := o.addr + ":" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", o.ns, progBin, "serve", addr)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	return addr
}

// TestNetworksConnect: an isolated network has a link to the host with an
// address of the pool. A workload inside reaches a host outside through
// the host (source NAT), the host reaches the workload at the address its
// mapping and its registry entry give, networks do not reach each other,
// and removing the last workload leaves no link and no rule behind.
func TestNetworksConnect(t *testing.T) {
	t.Parallel()
	out := makeOutside(t, 201)
	outAddr := out.serve(t, 18081)
	d := startDaemon(t)
	port := freePort(t)
	for _, n := range []string{"ci-x", "ci-y"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, n+".yaml", fmt.Sprintf(`
name: web-%s
command: ["@PROG@", "serve", "0.0.0.0:${PORT_HTTP}"]
endpoints: [{name: http, api: http, port: %d}]
network: %s
`, n, port, n)))
	}
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 2 || nets[0].Link == "" || nets[0].Address == "" || !nets[0].Egress || nets[0].Address == nets[1].Address {
		t.Fatalf("networks: %+v", nets)
	}
	byName := map[string]api.Network{nets[0].Name: nets[0], nets[1].Name: nets[1]}

	// Out through the host.
	eventually(t, "the outside host reached from ci-x", func() error {
		o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", outAddr)
		if code != 0 || !strings.Contains(o, "hello from testprog") {
			return fmt.Errorf("exit %d: %s %s", code, o, errOut)
		}
		return nil
	})
	// In from the host, at the address the mapping gives, and no other.
	for _, n := range []string{"ci-x", "ci-y"} {
		w := d.waitState(t, "web-"+n, api.StateRunning)
		var native string
		for _, in := range w.Ports[0].Instances {
			if in.Access == "native" {
				native = in.Address
			}
		}
		if native != byName[n].Address+":"+strconv.Itoa(port) {
			t.Errorf("%s: native address %q, want its network's %s", n, native, byName[n].Address)
		}
		waitServing(t, native, w.PID)
	}
	// Networks do not reach each other.
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", byName["ci-y"].Address+":"+strconv.Itoa(port)); code == 0 {
		t.Errorf("ci-x reached ci-y: %s", o)
	}

	table := firewall.TableFor(filepath.Join(d.dir, "run"))
	if ok, n, err := firewall.Exists(table); !ok || n == 0 || err != nil {
		t.Errorf("table %s: exists %v, %d rules, %v", table, ok, n, err)
	}

	// A crashed daemon's successor keeps every link as it was, and the
	// way out with it.
	d.kill(t)
	d = startDaemon(t, inDir(d.dir))
	var again []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &again)
	for i := range again {
		if again[i].Link != nets[i].Link || again[i].Address != nets[i].Address {
			t.Errorf("after a daemon restart: %+v, was %+v", again[i], nets[i])
		}
	}
	if o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-y", "--", d.prog, "get", outAddr); code != 0 {
		t.Errorf("ci-y's way out after a daemon restart: exit %d: %s %s", code, o, errOut)
	}
	d.mustCLI(t, "rm", "--all")
	eventually(t, "links and rules gone", func() error {
		for _, n := range nets {
			if err := exec.Command("ip", "link", "show", n.Link).Run(); err == nil {
				return fmt.Errorf("link %s of %s is still there", n.Link, n.Name)
			}
		}
		if ok, _, err := firewall.Exists(table); ok || err != nil {
			return fmt.Errorf("table %s still there (%v)", table, err)
		}
		return nil
	})
}
