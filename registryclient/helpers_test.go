package registryclient_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keyFile writes a fresh random key into a 0600 file.
func keyFile(t *testing.T) (path, key string) {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = hex.EncodeToString(b)
	path = filepath.Join(t.TempDir(), "registry.key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// clock is the registry's time in a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// realRegistry is the reference registry on a loopback listener, and a
// client for it.
type realRegistry struct {
	srv     *httptest.Server
	clk     *clock
	key     string
	keyFile string
	c       *registryclient.Client
}

func newRealRegistry(t *testing.T, opts ...registryclient.Option) *realRegistry {
	t.Helper()
	path, key := keyFile(t)
	clk := &clock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	s, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	c, err := registryclient.New(srv.URL, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return &realRegistry{srv: srv, clk: clk, key: key, keyFile: path, c: c}
}

// fake is a registry that answers whatever the test says, and a client for
// it with the key of keyFile.
func fake(t *testing.T, h http.HandlerFunc, opts ...registryclient.Option) (*registryclient.Client, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	path, key := keyFile(t)
	c, err := registryclient.New(srv.URL, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return c, key
}

// noKey fails the test if err's message holds the key.
func noKey(t *testing.T, err error, key string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), key) {
		t.Fatalf("an error holds the key: %v", err)
	}
}
