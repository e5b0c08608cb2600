package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePort is a loopback TCP port nothing listens on right now, chosen
// below the kernel's ephemeral range. A port from the kernel's own pick
// (port 0) is released into that range, where any connect(2) on the
// machine may take it as its local port before the test binds it: two
// etcd members dialling each other took a third's port that way. Below the
// range only an explicit bind can take it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo := ephemeralLow()
	for range 64 {
		if lo <= minPort+256 {
			break
		}
		port := minPort + rand.IntN(lo-minPort)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// minPort is the lowest port FreePort picks: above the well-known and
// most registered services' ports.
const minPort = 20000

// ephemeralLow is the bottom of the kernel's ephemeral port range
// (Linux's default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
