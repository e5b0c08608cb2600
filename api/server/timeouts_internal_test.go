package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/spec"
)

// statusOnly is a Backend that answers Status and Apply and nothing else:
// these tests are about the connection, not about what is served on it.
type statusOnly struct {
	Backend
	applying, most atomic.Int32
}

func (b *statusOnly) Status(context.Context) (*api.Status, error) {
	return &api.Status{Version: "test"}, nil
}

func (b *statusOnly) Apply(ctx context.Context, w *spec.Workload, o api.ApplyOptions) (*api.Workload, error) {
	n := b.applying.Add(1)
	defer b.applying.Add(-1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	time.Sleep(20 * time.Millisecond)
	return &api.Workload{Name: w.Name, State: api.StateRunning}, nil
}

func serveShort(t *testing.T, b Backend) string {
	t.Helper()
	was := [3]time.Duration{bodyTimeout, idleTimeout, writeTimeout}
	bodyTimeout, idleTimeout, writeTimeout = 200*time.Millisecond, 300*time.Millisecond, 200*time.Millisecond
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = New(b, func(Peer) bool { return true }, zap.NewNop()).Serve(ctx, l)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		bodyTimeout, idleTimeout, writeTimeout = was[0], was[1], was[2]
	})
	return sock
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	ne, ok := err.(net.Error)
	return err == nil || !(ok && ne.Timeout())
}

// TestSlowAndIdleConnectionsDropped: a body trickled in slower than
// bodyTimeout, and a kept-alive connection idle past idleTimeout, are
// closed by the daemon.
func TestSlowAndIdleConnectionsDropped(t *testing.T) {
	sock := serveShort(t, &statusOnly{})
	slow, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprint(slow, "PUT /v1/workloads/a HTTP/1.1\r\nHost: flyd\r\nContent-Length: 100\r\n\r\n{\"na")
	if !closedWithin(slow, 2*time.Second) {
		t.Error("a stalled body held its connection past the body timeout")
	}

	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "GET /v1/status HTTP/1.1\r\nHost: flyd\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %v %v", resp, err)
	}
	resp.Body.Close()
	if !closedWithin(idle, 2*time.Second) {
		t.Error("an idle kept-alive connection was not closed")
	}
}

// TestAppliesAreCapped: however many applies arrive at once, at most
// maxApplies are read and checked together.
func TestAppliesAreCapped(t *testing.T) {
	b := &statusOnly{}
	c := api.NewClient(serveShort(t, b))
	defer c.Close()
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			_, err := c.Apply(context.Background(), &spec.Workload{Name: fmt.Sprintf("w%d", i), Command: []string{"/bin/true"}}, api.ApplyOptions{})
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := b.most.Load(); m > maxApplies || m < 2 {
		t.Errorf("%d applies at once, want between 2 and %d", m, maxApplies)
	}
}
