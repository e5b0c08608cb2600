package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/internal/instance"
)

// outside is a host the test makes: a network namespace with a veth to the
// host on a /30 of 198.18.0.0/15 (set aside for tests), routed by the
// host like any network the host is on. Nothing leaves the machine.
type outside struct {
	ns, addr string
	link     string // the host's end
}

func makeOutside(t *testing.T, third int) *outside {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	host, peer := "fot"+id, "foi"+id
	o := &outside{ns: "flyd-out-" + id, addr: fmt.Sprintf("198.18.%d.2", third), link: host}
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

// gateways are the networks' ways to the host: the host end of each link.
func (d *daemon) gateways(t *testing.T) map[string]string {
	t.Helper()
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	gw := map[string]string{}
	for _, n := range nets {
		gw[n.Name] = n.Gateway
	}
	return gw
}

// get asks addr from inside the outside host, as a client beyond the
// host does; it returns what came back and whether the GET succeeded.
func (o *outside) get(t *testing.T, addr string) (string, bool) {
	t.Helper()
	b, err := exec.Command("ip", "netns", "exec", o.ns, progBin, "get", addr).Output()
	return string(b), err == nil
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
	index := linkIndexes(t, nets)

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
	// The registry is given the same addresses: each, dialled from the
	// host, reaches its endpoint and no other.
	eventually(t, "both endpoints registered at their networks' addresses", func() error {
		ins, err := d.registered(t)
		if err != nil {
			return err
		}
		found := 0
		for _, in := range ins {
			n := in.Metadata["flyd.network"]
			if in.Address != byName[n].Address || in.Port != port {
				return fmt.Errorf("%s registered at %s:%d, want %s:%d", in.ID, in.Address, in.Port, byName[n].Address, port)
			}
			w := d.get(t, "web-"+n)
			b, err := httpGet(net.JoinHostPort(in.Address, strconv.Itoa(in.Port)), "/")
			if err != nil || !strings.Contains(b, fmt.Sprintf("pid=%d\n", w.PID)) {
				return fmt.Errorf("%s's address reached %q (%v), not pid %d", in.ID, b, err, w.PID)
			}
			found++
		}
		if found != 2 {
			return fmt.Errorf("%d instances registered", found)
		}
		return nil
	})
	// Networks do not reach each other.
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", byName["ci-y"].Address+":"+strconv.Itoa(port)); code == 0 {
		t.Errorf("ci-x reached ci-y: %s", o)
	}

	table := instance.Name(filepath.Join(d.dir, "run"))
	if ok, n, err := firewall.Exists(table); !ok || n == 0 || err != nil {
		t.Errorf("table %s: exists %v, %d rules, %v", table, ok, n, err)
	}

	// egress: false keeps ci-x in, while the host still reaches it.
	if o := d.mustCLI(t, "apply", "-f", d.writeSpec(t, "ci-x-net.yaml", "kind: network\nname: ci-x\negress: false\n")); o != "network ci-x egress=false\n" {
		t.Errorf("applying a network document printed %q", o)
	}
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", outAddr); code == 0 {
		t.Errorf("ci-x reached the outside with egress off: %s", o)
	}
	// A server of the host's, on every address: ci-y reaches it through
	// its gateway, ci-x does not.
	hl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go func() {
		_ = http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the host") }))
	}()
	hostPort := strconv.Itoa(hl.Addr().(*net.TCPAddr).Port)
	if o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-y", "--", d.prog, "get", byName["ci-y"].Gateway+":"+hostPort); code != 0 || o != "the host\n" {
		t.Errorf("ci-y to the host: exit %d, %q %s", code, o, errOut)
	}
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", byName["ci-x"].Gateway+":"+hostPort); code == 0 {
		t.Errorf("ci-x reached the host with egress off: %s", o)
	}
	// Nor a published port of another network, at the host's address.
	pubPort := freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "pub.yaml", fmt.Sprintf(`
name: pub
command: ["@PROG@", "serve", "127.0.0.1:${PORT_HTTP}"]
endpoints: [{name: http, api: http, port: %d, publish: %d}]
network: ci-z
`, port, pubPort)))
	pub := d.waitState(t, "pub", api.StateRunning)
	eventually(t, "ci-y reaches ci-z's published port", func() error {
		o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-y", "--", d.prog, "get", byName["ci-y"].Gateway+":"+strconv.Itoa(pubPort))
		if code != 0 || !strings.Contains(o, fmt.Sprintf("pid=%d\n", pub.PID)) {
			return fmt.Errorf("exit %d: %s %s", code, o, errOut)
		}
		return nil
	})
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", byName["ci-x"].Gateway+":"+strconv.Itoa(pubPort)); code == 0 {
		t.Errorf("ci-x reached a published port with egress off: %s", o)
	}
	d.mustCLI(t, "rm", "pub")
	waitServing(t, byName["ci-x"].Address+":"+strconv.Itoa(port), d.get(t, "web-ci-x").PID)
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad-net.yaml", "kind: network\nname: ci-x\negres: false\n")); code != 1 || !strings.Contains(errOut, "egres: unknown field") {
		t.Errorf("a network document with an unknown key: exit %d, %s", code, errOut)
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
	if o, _, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", outAddr); code == 0 {
		t.Errorf("ci-x's egress came back on with the daemon's restart: %s", o)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "ci-x-net.yaml", "kind: network\nname: ci-x\negress: true\n"))
	if o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-x", "--", d.prog, "get", outAddr); code != 0 {
		t.Errorf("ci-x with egress on again: exit %d: %s %s", code, o, errOut)
	}
	d.mustCLI(t, "rm", "--all")
	eventually(t, "links and rules gone", func() error {
		for _, n := range nets {
			if _, err := net.InterfaceByIndex(index[n.Name]); err == nil {
				return fmt.Errorf("link %s of %s is still there", n.Link, n.Name)
			}
		}
		if ok, _, err := firewall.Exists(table); ok || err != nil {
			return fmt.Errorf("table %s still there (%v)", table, err)
		}
		return nil
	})
}

// get sends one HTTP request on an open connection and reads the answer.
func get(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(waitFor))
	if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: flyd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestPublishedPorts: a server bound to 127.0.0.1 inside its network is
// reached from the host at its published port; two networks publish the
// same inner port on two host ports at once; another network reaches it
// through the host's address; a host port taken is refused naming its
// holder; and an open connection through a published port lives through
// a kill -9 of the daemon and its restart.
func TestPublishedPorts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	inner := freePort(t)
	hp := map[string]int{"ci-p1": freePort(t), "ci-p2": freePort(t)}
	for _, n := range []string{"ci-p1", "ci-p2"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, n+".yaml", fmt.Sprintf(`
name: pub-%s
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: %d, publish: %d, visibility: public, exposure: public}]
network: %s
`, n, inner, hp[n], n)))
	}
	pids := map[string]int{}
	for _, n := range []string{"ci-p1", "ci-p2"} {
		w := d.waitState(t, "pub-"+n, api.StateRunning)
		pids[n] = w.PID
		want := map[string]string{"native": fmt.Sprintf("localhost:%d", hp[n]), "container": fmt.Sprintf("localhost:%d", inner), "public": fmt.Sprintf("127.0.0.1:%d", hp[n])}
		for _, in := range w.Ports[0].Instances {
			if want[in.Access] != in.Address {
				t.Errorf("%s: %s address %s, want %s", n, in.Access, in.Address, want[in.Access])
			}
			delete(want, in.Access)
		}
		if len(want) > 0 || w.Ports[0].Published != hp[n] {
			t.Errorf("%s: mapping %+v", n, w.Ports[0])
		}
		waitServing(t, "127.0.0.1:"+strconv.Itoa(hp[n]), w.PID)
	}
	// The registry is given the published address.
	eventually(t, "the published endpoints registered", func() error {
		ins, err := d.registered(t)
		if err != nil {
			return err
		}
		if len(ins) != 2 {
			return fmt.Errorf("%d instances", len(ins))
		}
		for _, in := range ins {
			n := in.Metadata["flyd.network"]
			if in.Address != "127.0.0.1" || in.Port != hp[n] {
				return fmt.Errorf("%s registered at %s:%d, want 127.0.0.1:%d", in.ID, in.Address, in.Port, hp[n])
			}
		}
		return nil
	})
	// Hairpin: ci-p2 reaches ci-p1's server at the host's address.
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	gw := map[string]string{}
	for _, n := range nets {
		gw[n.Name] = n.Gateway
		want := api.Published{HostPort: hp[n.Name], Port: inner, Workload: "pub-" + n.Name, Endpoint: "http"}
		if len(n.Published) != 1 || n.Published[0] != want {
			t.Errorf("%s publishes %+v, want %+v", n.Name, n.Published, want)
		}
	}
	o, errOut, code := runCLI(t, d.socket, "exec", "--network", "ci-p2", "--", d.prog, "get", gw["ci-p2"]+":"+strconv.Itoa(hp["ci-p1"]))
	if code != 0 || !strings.Contains(o, fmt.Sprintf("pid=%d\n", pids["ci-p1"])) {
		t.Errorf("ci-p2 through the host to ci-p1's published port: exit %d, %q %s", code, o, errOut)
	}
	// A host port already published is refused, and nothing of the refused
	// workload stays.
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "dup.yaml", fmt.Sprintf(`
name: dup
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, port: %d, publish: %d}]
network: ci-p3
`, inner, hp["ci-p1"])))
	if code != 1 || !strings.Contains(errOut, "port_in_use") || !strings.Contains(errOut, "pub-ci-p1") {
		t.Errorf("publishing a taken host port: exit %d, %s; want port_in_use naming pub-ci-p1", code, errOut)
	}
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	for _, n := range nets {
		if n.Name == "ci-p3" {
			t.Errorf("the refused workload's network stayed: %+v", n)
		}
	}

	// An open connection lives through the daemon's crash and restart.
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(hp["ci-p1"]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if b := get(t, c, r); !strings.Contains(b, fmt.Sprintf("pid=%d\n", pids["ci-p1"])) {
		t.Fatalf("through the published port: %q", b)
	}
	d.kill(t)
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "pub-ci-p1", api.StateRunning)
	if b := get(t, c, r); !strings.Contains(b, fmt.Sprintf("pid=%d\n", pids["ci-p1"])) {
		t.Fatalf("the same connection after a daemon restart: %q", b)
	}
	waitServing(t, "127.0.0.1:"+strconv.Itoa(hp["ci-p2"]), pids["ci-p2"])

	if len(portFiles(t, d, "pub-*")) == 0 {
		t.Error("no port reservation file of a running workload")
	}
	d.mustCLI(t, "rm", "--all")
	table := instance.Name(filepath.Join(d.dir, "run"))
	if ok, n, err := firewall.Exists(table); ok || err != nil {
		t.Errorf("table %s left with %d rules (%v)", table, n, err)
	}
	if _, err := httpGet("127.0.0.1:"+strconv.Itoa(hp["ci-p1"]), "/"); err == nil {
		t.Error("the published port still answers after rm")
	}
	if held := portFiles(t, d, "pub-*"); len(held) > 0 {
		t.Errorf("removed workloads still hold ports: %v", held)
	}
}

// TestPublishNeedsALink: a daemon whose networks are islands refuses to
// publish, saying why, and keeps nothing of the refused workload.
func TestPublishNeedsALink(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withArgs("--network-pool", "off"))
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "p.yaml", `
name: p
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, port: ephemeral, publish: ephemeral}]
network: island
`))
	if code != 1 || !strings.Contains(errOut, "runtime_unavailable") || !strings.Contains(errOut, "--network-pool off") {
		t.Errorf("publish without a link: exit %d, %s", code, errOut)
	}
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	var ps []api.PortMapping
	decodeJSON(t, d.mustCLI(t, "ports", "--json"), &ps)
	if len(nets) != 0 || len(ps) != 0 {
		t.Errorf("the refused workload left networks %+v, ports %+v", nets, ps)
	}
	if held := portFiles(t, d, "p"); len(held) > 0 {
		t.Errorf("the refused workload still holds ports: %v", held)
	}
}

// portFiles lists the daemon's port reservation files of the workloads
// matching pattern, in any network: RUN/ports/NETWORK/WORKLOAD.json. A
// missing ports directory fails the test, so that a moved one cannot make
// a check pass by finding nothing.
func portFiles(t *testing.T, d *daemon, pattern string) []string {
	t.Helper()
	dir := filepath.Join(d.runDir, "ports")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("no port tables to look at: %v", err)
	}
	held, err := filepath.Glob(filepath.Join(dir, "*", pattern+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// TestPublishedDualStackAndPoolOverlap: a server bound to [::] inside its
// network is reached at its published port too; a daemon refuses a pool
// that overlaps one of the host's routes, naming it.
func TestPublishedDualStackAndPoolOverlap(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	hostPort := freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "v6.yaml", fmt.Sprintf(`
name: any
command: ["@PROG@", "serve", "[::]:${PORT_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral, publish: %d}]
network: ci-v6
`, hostPort)))
	w := d.waitState(t, "any", api.StateRunning)
	waitServing(t, "127.0.0.1:"+strconv.Itoa(hostPort), w.PID)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, errOut, code := runCmd(t, cliCmd(ctx, d.dir+"/none.sock", "daemon", "--socket", d.dir+"/other.sock",
		"--state-dir", d.dir+"/other-state", "--run-dir", d.dir+"/other-run", "--registry", "off",
		"--network-pool", "127.0.0.0/16"))
	if code != 1 || !strings.Contains(errOut, "network pool 127.0.0.0/16 overlaps the host's route") {
		t.Errorf("a pool over loopback: exit %d, %s", code, errOut)
	}
}
