package health

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// requireRoot skips a test that needs root (namespaces, cgroups), except
// under CI=true, where a skip would be a hole in the coverage nobody sees.
func requireRoot(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "network namespaces and cgroups need root")
}

// testNetwork is a fresh isolated network, deleted at the end of the test.
func testNetwork(tb testing.TB) *sandbox.Network {
	tb.Helper()
	requireRoot(tb)
	n, err := sandbox.NewNetworks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	nw, err := n.Ensure("health-test")
	if err != nil {
		tb.Fatal(err)
	}
	// Registered after TempDir, so the mount is gone before its removal.
	tb.Cleanup(func() {
		if err := n.Delete(nw.Name); err != nil {
			tb.Error(err)
		}
	})
	return nw
}

// check runs p once under timeout and says how long it took.
func check(p Probe, timeout time.Duration) (error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	err := p.Check(ctx)
	return err, time.Since(began)
}

// listen opens a loopback listener closed at the end of the test.
func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

// closedPort is a loopback address nothing listens on: the kernel's pick,
// released.
func closedPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
