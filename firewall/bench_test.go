package firewall

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/connectmap"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
)

// benchPool is documentation space no host routes.
var benchPool = netip.MustParsePrefix("198.18.160.0/20")

// echo serves on l: each connection gets back what it sends.
func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() { _, _ = io.Copy(c, c); c.Close() }()
	}
}

// benchNets is a server network with an echo server on its loopback,
// published on a host port, beside a client network: the way from one
// network to another's published port goes through the host's forward
// path, where policies act.
type benchNets struct {
	f              *Firewall
	server, client *sandbox.Network
	serverLink     *sandbox.Link
	clientLink     *sandbox.Link
	port, hostPort int
}

func linkedNets(b *testing.B) *benchNets {
	testenv.RequireRoot(b, "networks are linked and published")
	nets, err := sandbox.NewNetworks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	bn := &benchNets{}
	link := func(name string) (*sandbox.Network, *sandbox.Link) {
		nw, err := nets.Ensure(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = nets.Delete(name) })
		l, err := nets.Connect(nw, benchPool)
		if err != nil {
			b.Fatal(err)
		}
		return nw, l
	}
	bn.server, bn.serverLink = link("bench")
	bn.client, bn.clientLink = link("bench-client")
	var inside net.Listener
	if err := bn.server.Do(func() error {
		var err error
		inside, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inside.Close() })
	go echo(inside)
	bn.port, bn.hostPort = inside.Addr().(*net.TCPAddr).Port, freeHostPort(b)
	bn.f, _ = testFirewall(b)
	if _, err := Forwarding(); err != nil {
		b.Fatal(err)
	}
	l := bn.serverLink
	if err := bn.f.Set("bench", Net{Link: l.Name, Subnet: l.Subnet, Inner: l.Inner, Egress: true, NS: bn.server.Path,
		Published: []Forward{{HostPort: bn.hostPort, Port: bn.port}}, Served: []int{bn.port}}); err != nil {
		b.Fatal(err)
	}
	c := bn.clientLink
	if err := bn.f.Set("bench-client", Net{Link: c.Name, Subnet: c.Subnet, Inner: c.Inner, Egress: true}); err != nil {
		b.Fatal(err)
	}
	return bn
}

// servers starts one echo server on the host's loopback, and one on
// 127.0.0.1 inside a linked network published on a host port: the same
// server code reached directly, through flyd's published port's nftables
// DNAT, through the same port rewritten at connect() by a connect map
// attached at the unified cgroup root as a daemon attaches it (the map
// holds the port only while that connection is made), and at the
// network's own address (the host's NAT skipped, the network's kept).
func servers(b *testing.B) []echoWay {
	bn := linkedNets(b)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close() })
	go echo(host)
	published := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(bn.hostPort))
	cm, cmErr := connectmap.Open(connectmap.Config{})
	if cmErr == nil {
		b.Cleanup(func() { cm.Close() })
	}
	return []echoWay{
		{name: "direct", addr: host.Addr().String()},
		{name: "published", addr: published.String()},
		{name: "inner", addr: net.JoinHostPort(bn.serverLink.Inner.String(), strconv.Itoa(bn.port))},
		{name: "published-bpf", addr: published.String(), dial: func() (net.Conn, error) {
			if cmErr != nil {
				b.Skipf("no BPF at connect() here: %v", cmErr)
			}
			if err := cm.Set(map[netip.AddrPort]connectmap.Target{published: {Addr: bn.serverLink.Inner, Ports: []uint16{uint16(bn.port)}}}); err != nil {
				return nil, err
			}
			defer cm.Set(nil)
			c, err := net.Dial("tcp", published.String())
			if err == nil && c.LocalAddr().(*net.TCPAddr).IP.IsLoopback() {
				c.Close()
				return nil, fmt.Errorf("the connection to %v was not rewritten (it leaves from %v)", published, c.LocalAddr())
			}
			return c, err
		}},
	}
}

// echoWay is one way to the echo server: dial, or a plain dial of addr.
type echoWay struct {
	name, addr string
	dial       func() (net.Conn, error)
}

func (w echoWay) connect(b *testing.B) net.Conn {
	var c net.Conn
	var err error
	if w.dial != nil {
		c, err = w.dial()
	} else {
		c, err = net.Dial("tcp", w.addr)
	}
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func freeHostPort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// BenchmarkRoundTrip is one 64-byte request answered over an open
// connection: directly on the host's loopback, through a published
// port into a network whose server binds 127.0.0.1, by nftables' DNAT and
// rewritten at connect(), and to that network's own address.
func BenchmarkRoundTrip(b *testing.B) {
	for _, way := range servers(b) {
		b.Run(way.name, func(b *testing.B) {
			c := way.connect(b)
			defer c.Close()
			buf := make([]byte, 64)
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkThroughput is 1 MiB sent and echoed back per op, both ways,
// on the ways of BenchmarkRoundTrip.
func BenchmarkThroughput(b *testing.B) {
	for _, way := range servers(b) {
		b.Run(way.name, func(b *testing.B) {
			c := way.connect(b)
			defer c.Close()
			pump(b, c)
		})
	}
}

// BenchmarkGuardedThroughput is BenchmarkThroughput from one network to
// another's published port, through the host's forward path: with no
// policy, and with both directions guarded by an allow for it (the
// connection is judged once; what follows passes as a reply).
func BenchmarkGuardedThroughput(b *testing.B) {
	bn := linkedNets(b)
	to := net.JoinHostPort(bn.clientLink.Host.String(), strconv.Itoa(bn.hostPort))
	in := []Allow{{Policy: "bench", Links: []string{bn.clientLink.Name}, Ports: []Port{{Proto: 6, Port: bn.port}}}}
	out := []Allow{{Policy: "bench", Links: []string{bn.serverLink.Name}}}
	for _, tt := range []struct {
		name string
		proj Projection
	}{
		{"no-policy", Projection{}},
		{"allowed", Projection{Guards: []Guard{{Link: bn.serverLink.Name, Ingress: &in}, {Link: bn.clientLink.Name, Egress: &out}}}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			if err := bn.f.SetProjection(tt.proj); err != nil {
				b.Fatal(err)
			}
			var c net.Conn
			if err := bn.client.Do(func() error {
				var err error
				c, err = net.Dial("tcp", to)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			pump(b, c)
		})
	}
}

// cpuPerOp reports, when called at the end, the CPU time the process
// spent per op (user and system, the kernel's side of both ends of the
// connection included: client and servers are this process), a figure a
// loaded machine's waits do not enter.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// pump sends 1 MiB per op over c and reads it back.
func pump(b *testing.B, c net.Conn) {
	const size = 1 << 20
	out, in := make([]byte, size), make([]byte, size)
	b.SetBytes(2 * size)
	defer cpuPerOp(b)()
	for b.Loop() {
		done := make(chan error, 1)
		go func() { _, err := c.Write(out); done <- err }()
		if _, err := io.ReadFull(c, in); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetProjection is what putting policies in force costs: the whole
// table written in one transaction, with rules allow rules in the guard
// of one network (each a network or an address range, at a port); 0 is
// a guard that denies.
func BenchmarkSetProjection(b *testing.B) {
	for _, rules := range []int{0, 100, 1000} {
		b.Run(strconv.Itoa(rules)+"-rules", func(b *testing.B) {
			f, _ := testFirewall(b)
			if err := f.Set("db", Net{Link: "fly-9994", Subnet: netip.MustParsePrefix("198.18.250.12/30")}); err != nil {
				b.Fatal(err)
			}
			sets := [2][]Guard{}
			for k := range sets {
				allows := make([]Allow, rules)
				for i := range allows {
					allows[i] = Allow{Policy: "bench", Ports: []Port{{Proto: 6, Port: 1000 + i + k}}}
					if i%2 == 0 {
						allows[i].Links = []string{"fly-" + strconv.Itoa(i)}
					} else {
						allows[i].CIDRs = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
					}
				}
				sets[k] = []Guard{{Link: "fly-9994", Ingress: &allows}}
			}
			i := 0
			for b.Loop() {
				if err := f.SetProjection(Projection{Guards: sets[i%2]}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSetReach is what the endpoints' visibilities cost to put in
// force: the whole table written with ports of the host's own guarded,
// alternating between two sets of them as consecutive applies do.
func BenchmarkSetReach(b *testing.B) {
	for _, ports := range []int{100, 1000, 3000} {
		b.Run(strconv.Itoa(ports)+"-ports", func(b *testing.B) {
			f, _ := testFirewall(b)
			sets := [2][]Reach{}
			for k := range sets {
				for i := range ports + k {
					sets[k] = append(sets[k], Reach{Port: 20000 + i})
				}
			}
			i := 0
			for b.Loop() {
				if err := f.SetProjection(Projection{Reach: sets[i%2]}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
