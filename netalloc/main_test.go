package netalloc

import (
	"net"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newManager returns a manager persisted in a fresh directory, so every
// test also exercises the store.
func newManager(t *testing.T) (*Manager, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// freePort is a loopback TCP port nothing listens on right now.
var freePort = testenv.FreePort

// listen holds addr for the rest of the test, as a foreign process would.
func listen(t *testing.T, network, addr string) int {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// ownComm is the name /proc gives this test binary.
func ownComm(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// needRoot skips a test that needs root, except in CI where a skipped
// namespace test would hide a regression.
func needRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "needs root to create a network namespace")
}
