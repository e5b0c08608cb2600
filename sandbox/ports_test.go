package sandbox

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// pingPong connects to ln from the current thread and checks that bytes
// travel both ways.
func pingPong(ln net.Listener) error {
	c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	// The connection is already queued, unless it went to another
	// namespace's listener: then fail rather than hang.
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
	s, err := ln.Accept()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("read %q, want ping", buf)
	}
	return nil
}

func TestEnsureLoopbackUp(t *testing.T) {
	n := newTestNetworks(t)
	nw, err := n.Ensure("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			err := nw.Do(func() error {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return err
				}
				defer ln.Close()
				return pingPong(ln)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// listenIn opens a listener inside nw; the socket stays in nw's namespace
// after Do returns.
func listenIn(t *testing.T, nw *Network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := nw.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, nw.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// accepts reports whether a connection is waiting on ln.
func accepts(ln net.Listener) bool {
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	c, err := ln.Accept()
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestNetworksIsolatePorts(t *testing.T) {
	n := newTestNetworks(t)
	// Find a port free on the host; the namespaces start empty anyway.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	listeners := map[string]net.Listener{}
	for _, name := range []string{"alpha", "beta"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		listeners[name] = listenIn(t, nw, addr)
	}

	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("host reached %s, which only isolated networks listen on", addr)
	}

	host, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("host cannot listen on %s next to the networks: %v", addr, err)
	}
	defer host.Close()

	tests := []struct {
		from string // "" is the host
		want string
	}{
		{"", "host"},
		{"alpha", "alpha"},
		{"beta", "beta"},
	}
	for _, tt := range tests {
		t.Run("from "+tt.want, func(t *testing.T) {
			dial := func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
				}
				return err
			}
			if tt.from != "" {
				nw, err := n.Open(tt.from)
				if err != nil {
					t.Fatal(err)
				}
				onHost := dial
				dial = func() error { return nw.Do(onHost) }
			}
			if err := dial(); err != nil {
				t.Fatal(err)
			}
			all := map[string]net.Listener{"host": host, "alpha": listeners["alpha"], "beta": listeners["beta"]}
			for name, ln := range all {
				if got := accepts(ln); got != (name == tt.want) {
					t.Errorf("listener in %s accepted = %v", name, got)
				}
			}
		})
	}
}
