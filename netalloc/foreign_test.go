package netalloc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

// TestAssignRefusesForeignListener holds a port in this process, which
// flyd does not manage, and expects the refusal to name it.
func TestAssignRefusesForeignListener(t *testing.T) {
	tests := []struct{ name, network, addr string }{
		{"loopback", "tcp4", "127.0.0.1:0"},
		{"ipv4 wildcard", "tcp4", "0.0.0.0:0"},
		{"ipv6 wildcard dual-stack", "tcp", "[::]:0"},
		{"ipv6 only", "tcp6", "[::]:0"},
		{"ipv6 loopback", "tcp6", "[::1]:0"},
	}
	comm := ownComm(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t)
			port := listen(t, tt.network, tt.addr)
			_, err := m.Assign(context.Background(), "host", nil, "api-server", []Request{{Endpoint: "http", Mode: ModeFixed, Port: port}})
			if !errors.Is(err, errdefs.ErrPortInUse) {
				t.Fatalf("err = %v, want ErrPortInUse", err)
			}
			var pe *PortInUseError
			if !errors.As(err, &pe) || pe.PID != os.Getpid() || pe.Program != comm {
				t.Fatalf("err = %v, want it to name pid %d (%s)", err, os.Getpid(), comm)
			}
			if want := fmt.Sprintf("port %d in network host is in use by pid %d (%s)", port, os.Getpid(), comm); pe.Error() != want {
				t.Errorf("message %q, want %q", pe.Error(), want)
			}
			if m.InUse("host") {
				t.Error("refused port was reserved")
			}
		})
	}
}

// TestAssignForeignListenerInNamespace checks that the probe and the
// /proc lookup both happen inside the namespace: a listener there is
// found and named, and the host's same number is unaffected.
func TestAssignForeignListenerInNamespace(t *testing.T) {
	ns := newNetns(t)
	ns.loUp(t)
	var l net.Listener
	if err := ns.Do(func() (err error) {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	m, _ := newManager(t)
	req := []Request{{Endpoint: "http", Mode: ModeFixed, Port: port}}
	_, err := m.Assign(context.Background(), "isolated", ns, "api-server", req)
	var pe *PortInUseError
	if !errors.As(err, &pe) || pe.PID != os.Getpid() || pe.Network != "isolated" {
		t.Fatalf("in namespace: err = %v, want in use by pid %d in network isolated", err, os.Getpid())
	}
	if _, err := m.Assign(context.Background(), "host", nil, "api-server", req); err != nil {
		t.Fatalf("host does not see the namespace's listener, yet: %v", err)
	}
}

func TestPortInUseMessages(t *testing.T) {
	tests := []struct {
		err  PortInUseError
		want string
	}{
		{PortInUseError{Network: "host", Port: 8080, Workload: "api-server", Endpoint: "http"}, "port 8080 in network host is held by workload api-server (endpoint http)"},
		{PortInUseError{Network: "host", Port: 18591, Workload: "api-server", Endpoint: "http", Hashed: true},
			"port 18591 in network host is held by workload api-server (endpoint http), whose hashed port is the same: give one of them a port number or ephemeral"},
		{PortInUseError{Network: "host", Port: 8080, PID: 1234, Program: "nginx"}, "port 8080 in network host is in use by pid 1234 (nginx)"},
		{PortInUseError{Network: "ci", Port: 80, PID: 1}, "port 80 in network ci is in use by pid 1"},
		{PortInUseError{Network: "host", Port: 8080}, "port 8080 in network host is in use"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if !errors.Is(&tt.err, errdefs.ErrPortInUse) {
			t.Errorf("%q does not wrap ErrPortInUse", tt.want)
		}
	}
}
