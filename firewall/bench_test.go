package firewall

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"

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

// servers starts one echo server on the host's loopback, and one on
// 127.0.0.1 inside a linked network published on a host port: the same
// server code reached directly and through flyd's published port.
func servers(b *testing.B) (direct, published string) {
	testenv.RequireRoot(b, "a network is linked and published")
	nets, err := sandbox.NewNetworks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	nw, err := nets.Ensure("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = nets.Delete("bench") })
	l, err := nets.Connect(nw, benchPool)
	if err != nil {
		b.Fatal(err)
	}
	var inside net.Listener
	if err := nw.Do(func() error {
		var err error
		inside, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inside.Close() })
	go echo(inside)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close() })
	go echo(host)

	port := inside.Addr().(*net.TCPAddr).Port
	hostPort := freeHostPort(b)
	f, _ := testFirewall(b)
	if _, err := Forwarding(); err != nil {
		b.Fatal(err)
	}
	n := Net{Link: l.Name, Subnet: l.Subnet, Inner: l.Inner, Egress: true, NS: nw.Path,
		Published: []Forward{{HostPort: hostPort, Port: port}}, Served: []int{port}}
	if err := f.Set("bench", n); err != nil {
		b.Fatal(err)
	}
	return host.Addr().String(), "127.0.0.1:" + strconv.Itoa(hostPort)
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
// connection: directly on the host's loopback, and through a published
// port into a network whose server binds 127.0.0.1.
func BenchmarkRoundTrip(b *testing.B) {
	direct, published := servers(b)
	for _, tt := range []struct{ name, addr string }{{"direct", direct}, {"published", published}} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := net.Dial("tcp", tt.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64)
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

// BenchmarkThroughput is 1 MiB sent and echoed back per op, both ways.
func BenchmarkThroughput(b *testing.B) {
	direct, published := servers(b)
	const size = 1 << 20
	for _, tt := range []struct{ name, addr string }{{"direct", direct}, {"published", published}} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := net.Dial("tcp", tt.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			out, in := make([]byte, size), make([]byte, size)
			b.SetBytes(2 * size)
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
		})
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
