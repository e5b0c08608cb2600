package health

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTCP(t *testing.T) {
	live := listen(t).Addr().String()
	tests := []struct {
		name    string
		addr    string
		refused bool
	}{
		{"live listener", live, false},
		{"closed port", closedPort(t), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, took := check(TCP(nil, tt.addr), time.Second)
			if tt.refused != (err != nil) {
				t.Fatalf("Check = %v, want refused=%v", err, tt.refused)
			}
			if tt.refused && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("Check = %v, want ECONNREFUSED", err)
			}
			if took > 500*time.Millisecond {
				t.Fatalf("Check took %s, want an immediate answer", took)
			}
		})
	}
}

// serveEach answers every connection of a new listener with reply.
func serveEach(t *testing.T, reply func(c net.Conn)) string {
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); reply(c) }()
		}
	}()
	return ln.Addr().String()
}

func TestTCPExchange(t *testing.T) {
	pong := serveEach(t, func(c net.Conn) {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line == "PING\r\n" {
			io.WriteString(c, "+PONG\r\n")
		}
	})
	loading := serveEach(t, func(c net.Conn) {
		bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "-LOADING secret-ish dataset is loading\r\n")
	})
	greeter := serveEach(t, func(c net.Conn) { io.WriteString(c, "SSH-2.0-test\r\n") })
	hangup := serveEach(t, func(c net.Conn) {})
	silent := listen(t).Addr().String() // accepted by the kernel, never served
	tests := []struct {
		name, addr, send, expect string
		fails                    string // in the error; "" healthy
	}{
		{"answers", pong, "PING\r\n", "+PONG", ""},
		{"greets", greeter, "", "SSH-2.0-", ""},
		{"wrong reply", loading, "PING\r\n", "+PONG", "not the 5 expected"},
		{"hangs up", hangup, "PING\r\n", "+PONG", "after 0 of the 5 bytes"},
		{"accepts, never serves", silent, "PING\r\n", "+PONG", "timeout"},
		{"no conversation", silent, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, took := check(TCPExchange(nil, tt.addr, tt.send, tt.expect), 300*time.Millisecond)
			switch {
			case tt.fails == "" && err != nil:
				t.Fatalf("Check = %v, want healthy", err)
			case tt.fails != "" && (err == nil || !strings.Contains(err.Error(), tt.fails)):
				t.Fatalf("Check = %v, want an error saying %q", err, tt.fails)
			case err != nil && strings.Contains(err.Error(), "LOADING"):
				t.Fatalf("the error quotes the reply: %v", err)
			case took > time.Second:
				t.Fatalf("Check took %s, past its timeout", took)
			}
		})
	}
}
