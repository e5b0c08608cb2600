package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/connectmap"
)

// TestPublishedPortAtConnect: a host-local client of a published port is
// taken to the network once, at connect(), by the daemon's BPF program:
// the daemon's map holds the port, the client's socket leaves from the
// link's host end and names the address it dialled as its peer, and the
// workload answers. A host workload that the network's declared reach
// refuses is still refused at once, and one that uses the workload
// passes. Killed with SIGKILL, the daemon takes its programs with it and
// the port answers through nftables; the next daemon puts the port back
// in a map of its own; one started with --publish-at-connect=false leaves
// the port to nftables and says so; after the test no program of the
// test's daemons is left attached.
func TestPublishedPortAtConnect(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	root, err := connectmap.Root()
	if err != nil {
		t.Skipf("no cgroup2 hierarchy: %v", err)
	}
	var progs []ebpf.ProgramID // every daemon's of the test
	// Registered before the daemon's cleanup: it runs after it.
	t.Cleanup(func() {
		at, err := connectmap.Attached(root)
		if err != nil {
			t.Error(err)
		}
		for _, a := range at {
			if slices.Contains(progs, a.Program) {
				t.Errorf("program %d of the test's daemons still attached at %s", a.Program, root)
			}
		}
	})
	d := startDaemon(t)
	st, err := d.client.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.PublishedPorts, "rewritten at connect()") {
		t.Fatalf("flyd status: published ports %q, want rewritten at connect()", st.PublishedPorts)
	}
	if o := d.mustCLI(t, "status"); !strings.Contains(o, "published ports") || !strings.Contains(o, "rewritten at connect()") {
		t.Errorf("flyd status does not say how published ports go:\n%s", o)
	}
	events := startStream(t, d.socket, "events")
	inner, hp := freePort(t), freePort(t)
	published := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(hp))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stack.yaml", fmt.Sprintf(`
kind: network
name: ci-bpf
reach: declared
---
name: web
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: %[1]d, publish: %[2]d}]
network: ci-bpf
---
name: app
command: ["@PROG@", "dial", "127.0.0.1:%[2]d", "100ms"]
uses: [web]
---
name: side
command: ["@PROG@", "dial", "127.0.0.1:%[2]d", "100ms"]
`, inner, hp)))
	web := d.waitState(t, "web", api.StateRunning)
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	i := slices.IndexFunc(nets, func(n api.Network) bool { return n.Name == "ci-bpf" })
	if i < 0 {
		t.Fatalf("no network ci-bpf: %+v", nets)
	}
	network := nets[i]
	want := connectmap.Target{Addr: netip.MustParseAddr(network.Address), Ports: []uint16{uint16(inner)}}

	// The map holds the published port, to the network's address.
	mine := func() (ebpf.ProgramID, bool) {
		at, err := connectmap.Attached(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range at {
			if tg, ok := a.Entries[published]; ok {
				if tg.Addr != want.Addr || !slices.Equal(tg.Ports, want.Ports) {
					t.Fatalf("the map takes %v to %v, want %v", published, tg, want)
				}
				return a.Program, true
			}
		}
		return 0, false
	}
	var prog ebpf.ProgramID
	eventually(t, "the daemon's map holding the published port", func() error {
		var ok bool
		if prog, ok = mine(); !ok {
			return fmt.Errorf("no map at %s holds %v", root, published)
		}
		return nil
	})
	progs = append(progs, prog)

	// The test's own connection, rewritten: it leaves from the link's host
	// end (through nftables it would leave from 127.0.0.1 and be
	// masqueraded), names the published port as its peer, and reaches web.
	waitServing(t, published.String(), web.PID)
	through := func(wantLocal string) {
		t.Helper()
		c, err := net.Dial("tcp", published.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		local, _, _ := net.SplitHostPort(c.LocalAddr().String())
		if local != wantLocal || c.RemoteAddr().String() != published.String() {
			t.Errorf("a connection to %v: from %v to %v, want from %s to %v", published, c.LocalAddr(), c.RemoteAddr(), wantLocal, published)
		}
		if b := get(t, c, bufio.NewReader(c)); !strings.Contains(b, "pid="+strconv.Itoa(web.PID)+"\n") {
			t.Errorf("through %v: %q, want web's pid %d", published, b, web.PID)
		}
	}
	through(network.Gateway)

	// Declared reach holds on the rewritten connection: app passes, side
	// is refused at once.
	d.waitLog(t, "app", "dial ok")
	d.requireRefusedAtOnce(t, "side")
	// Counted at the address the connection reached: the inner port.
	refused := fmt.Sprintf("undeclared dependency: side → web/http (%d)", inner)
	events.waitLine(t, "the event naming side", func(l string) bool { return strings.Contains(l, refused) })

	// Killed, the daemon's programs go with it; the port answers through
	// nftables, from 127.0.0.1.
	d.kill(t)
	eventually(t, "the killed daemon's program detached", func() error {
		if _, ok := mine(); ok {
			return fmt.Errorf("a map at %s still holds %v", root, published)
		}
		return nil
	})
	through("127.0.0.1")

	// The next daemon puts it back, in a map of its own.
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "web", api.StateRunning)
	eventually(t, "the next daemon's map holding the published port", func() error {
		p, ok := mine()
		if !ok {
			return fmt.Errorf("no map at %s holds %v", root, published)
		}
		if p == prog {
			return fmt.Errorf("the killed daemon's program %d is still attached", p)
		}
		progs = append(progs, p)
		return nil
	})
	through(network.Gateway)

	// Turned off, the port is nftables' alone, and flyd status says why.
	d.terminate(t)
	d = startDaemon(t, inDir(d.dir), withArgs("--publish-at-connect=false"))
	d.waitState(t, "web", api.StateRunning)
	if st, err := d.client.Status(t.Context()); err != nil || !strings.Contains(st.PublishedPorts, "--publish-at-connect=false") {
		t.Errorf("flyd status with --publish-at-connect=false: published ports %q, %v", st.PublishedPorts, err)
	}
	eventually(t, "no map holding the published port", func() error {
		if p, ok := mine(); ok {
			return fmt.Errorf("program %d's map at %s holds %v", p, root, published)
		}
		return nil
	})
	through("127.0.0.1")
	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "web", api.StateRunning)
	eventually(t, "the port back in a map", func() error {
		p, ok := mine()
		if !ok {
			return fmt.Errorf("no map at %s holds %v", root, published)
		}
		progs = append(progs, p)
		return nil
	})

	// Withdrawn with its workload.
	d.mustCLI(t, "rm", "web")
	eventually(t, "the published port gone from the map", func() error {
		if _, ok := mine(); ok {
			return fmt.Errorf("a map at %s still holds %v", root, published)
		}
		return nil
	})
}
