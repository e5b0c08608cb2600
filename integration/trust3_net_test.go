package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// hostServices are a host's TCP (HTTP) and UDP (echo) services on [::],
// both families, as a daemon of the host that trusts its neighbours
// would run them; they go when the test ends.
func hostServices(t *testing.T) (tcpPort, udpPort int) {
	t.Helper()
	hl, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hl.Close() })
	go func() {
		_ = http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the host") }))
	}()
	ul, err := net.ListenPacket("udp", "[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ul.Close() })
	go func() {
		b := make([]byte, 512)
		for {
			_, from, err := ul.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = ul.WriteTo([]byte("the host"), from)
		}
	}()
	return hl.Addr().(*net.TCPAddr).Port, ul.LocalAddr().(*net.UDPAddr).Port
}

// linkLocal is the IPv6 link-local address a link has or, with IPv6 off
// on it, the one the kernel would give it from its MAC (EUI-64): what a
// program inside a network dials to try the host end of its link.
func linkLocal(t *testing.T, link string) string {
	t.Helper()
	if a := linkLocalNow(t, nil, link); a != "" {
		return a
	}
	i, err := net.InterfaceByName(link)
	if err != nil || len(i.HardwareAddr) != 6 {
		t.Fatalf("link %s: %v, MAC %v", link, err, i)
	}
	m := i.HardwareAddr
	return netipFE80(m[0]^2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5])
}

func netipFE80(b ...byte) string {
	ip := make(net.IP, 16)
	ip[0], ip[1] = 0xfe, 0x80
	copy(ip[8:], b)
	return ip.String()
}

// linkLocalNow is the link-local address link holds and may use (past
// duplicate address detection), "" for none; in a namespace when ns
// names one.
func linkLocalNow(t *testing.T, ns []string, link string) string {
	t.Helper()
	args := append(append([]string{}, ns...), "ip", "-6", "-o", "addr", "show", "dev", link, "scope", "link")
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		for i, w := range f {
			if w == "inet6" && i+1 < len(f) && !strings.Contains(l, "tentative") {
				a, _, _ := strings.Cut(f[i+1], "/")
				return a
			}
		}
	}
	return ""
}

// TestEgressCoversIPv6 (issue 49, Medium): a network with egress: false,
// and one whose policy says egress: [], reach none of the host's
// services: not at the host end of their link over IPv4, TCP or UDP, nor
// at its IPv6 link-local address, which the kernel would give every veth.
// Networks are IPv4: IPv6 is off at both ends of their links, and when it
// is turned on again (as root inside a network may) the host's table
// refuses it all the same, while the host still reaches into the
// network. A network with egress reaches the host over IPv4, TCP and UDP.
func TestEgressCoversIPv6(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	tcpPort, udpPort := hostServices(t)
	d := startDaemon(t)
	inner := freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "nets.yaml", fmt.Sprintf(`
kind: network
name: ci-sealed
egress: false
---
kind: policy
name: quiet-out
select: {workloads: [quiet]}
egress: []
---
name: sealed
command: ["@PROG@", "serve", "[::]:${PORT_HTTP}"]
endpoints: [{name: http, api: http, port: %d}]
network: ci-sealed
---
name: quiet
command: ["@PROG@", "signals"]
network: ci-quiet
---
name: open
command: ["@PROG@", "signals"]
network: ci-open
`, inner)))
	sealed := d.waitState(t, "sealed", api.StateRunning)
	d.waitState(t, "quiet", api.StateRunning)
	d.waitState(t, "open", api.StateRunning)
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	byName := map[string]api.Network{}
	for _, n := range nets {
		byName[n.Name] = n
	}
	probe := func(network, mode, addr string) (string, bool) {
		t.Helper()
		o, errOut, code := runCLI(t, d.socket, "exec", "--network", network, "--", d.prog, mode, addr)
		return strings.TrimSpace(o + errOut), code == 0 && strings.TrimSpace(o) == "the host"
	}
	// What a program inside tries: the host end over IPv4 and at its
	// link-local address, TCP and UDP.
	targets := func(n api.Network) map[string][2]string {
		ll := "[" + linkLocal(t, n.Link) + "%25eth0]"
		ll4udp := "[" + strings.ReplaceAll(ll[1:len(ll)-1], "%25", "%") + "]"
		return map[string][2]string{
			"TCP over IPv4":            {"get", n.Gateway + ":" + strconv.Itoa(tcpPort)},
			"UDP over IPv4":            {"udp", n.Gateway + ":" + strconv.Itoa(udpPort)},
			"TCP over IPv6 link-local": {"get", ll + ":" + strconv.Itoa(tcpPort)},
			"UDP over IPv6 link-local": {"udp", ll4udp + ":" + strconv.Itoa(udpPort)},
		}
	}
	refused := func(network, when string, ipv4 bool) {
		t.Helper()
		for what, p := range targets(byName[network]) {
			if !ipv4 && strings.Contains(what, "IPv4") {
				continue
			}
			if o, ok := probe(network, p[0], p[1]); ok {
				t.Errorf("%s%s reached the host's service, %s at %s: %s", network, when, what, p[1], o)
			}
		}
	}
	// Both ends of a link are made without IPv6.
	nsOf := func(network string) []string {
		return []string{"nsenter", "--net=" + filepath.Join(d.runDir, "netns", network)}
	}
	off := func(ns []string, link string) string {
		t.Helper()
		args := append(append([]string{}, ns...), "cat", "/proc/sys/net/ipv6/conf/"+link+"/disable_ipv6")
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// settled waits, where IPv6 is on at both ends, until both have
	// their link-local address past duplicate address detection: what a
	// program inside that tries it a few seconds later finds.
	settled := func(network string) {
		t.Helper()
		hostEnd, ns := byName[network].Link, nsOf(network)
		if off(nil, hostEnd) != "0" || off(ns, "eth0") != "0" {
			return
		}
		eventually(t, "link-local addresses at both ends of "+network+"'s link", func() error {
			if h, in := linkLocalNow(t, nil, hostEnd), linkLocalNow(t, ns, "eth0"); h == "" || in == "" {
				return fmt.Errorf("host end %q, eth0 %q", h, in)
			}
			return nil
		})
	}
	for _, n := range []string{"ci-sealed", "ci-quiet", "ci-open"} {
		if a, b := off(nil, byName[n].Link), off(nsOf(n), "eth0"); a != "1" || b != "1" {
			t.Errorf("IPv6 on %s's link: disable_ipv6 %s on the host end, %s on eth0; want 1 on both", n, a, b)
		}
		settled(n)
	}
	// The open network reaches the host over IPv4, both protocols.
	for what, p := range targets(byName["ci-open"]) {
		if !strings.Contains(what, "IPv4") {
			continue
		}
		if o, ok := probe("ci-open", p[0], p[1]); !ok {
			t.Errorf("ci-open, with egress, does not reach the host's service, %s at %s: %s", what, p[1], o)
		}
	}
	refused("ci-sealed", " (egress: false)", true)
	refused("ci-quiet", " (policy egress: [])", true)
	refused("ci-open", " (networks are IPv4)", false)

	// Turned on again, at both ends: the rule refuses it.
	hostEnd, sealedNS := byName["ci-sealed"].Link, nsOf("ci-sealed")
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+hostEnd+"/disable_ipv6", []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, sealedNS...), "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("turn IPv6 on inside ci-sealed: %v: %s", err, out)
	}
	var innerLL string
	eventually(t, "link-local addresses at both ends of ci-sealed's link", func() error {
		innerLL = linkLocalNow(t, sealedNS, "eth0")
		if linkLocalNow(t, nil, hostEnd) == "" || innerLL == "" {
			return fmt.Errorf("host end %q, eth0 %q", linkLocalNow(t, nil, hostEnd), innerLL)
		}
		return nil
	})
	// The addresses work: the host reaches the network's server at its
	// link-local address.
	// The zone by index: this process's cache of names would give a link
	// of the same name that an earlier test deleted.
	index, err := os.ReadFile("/sys/class/net/" + hostEnd + "/ifindex")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the host reaching ci-sealed over IPv6 link-local", func() error {
		addr := "[" + innerLL + "%25" + strings.TrimSpace(string(index)) + "]:" + strconv.Itoa(inner)
		b, err := httpGet(addr, "/")
		if err != nil || !strings.Contains(b, fmt.Sprintf("pid=%d\n", sealed.PID)) {
			return fmt.Errorf("%s: %q %v", addr, b, err)
		}
		return nil
	})
	refused("ci-sealed", " (IPv6 turned on at both ends)", false)
}
