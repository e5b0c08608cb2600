package registryclient_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// Many concurrent heart-beats share a bounded set of keep-alive
// connections: never more open at once than the bound, and reused.
func TestBoundedKeepAliveConnections(t *testing.T) {
	tests := []struct {
		name string
		opts []registryclient.Option
		max  int
	}{
		{"default", nil, registryclient.DefaultMaxConns},
		{"WithMaxConns(2)", []registryclient.Option{registryclient.WithMaxConns(2)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			remotes := map[string]bool{}
			inFlight, most := 0, 0
			c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				remotes[r.RemoteAddr] = true
				inFlight++
				most = max(most, inFlight)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				inFlight--
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}, tt.opts...)
			for round := 0; round < 2; round++ {
				var wg sync.WaitGroup
				for i := 0; i < 100; i++ {
					wg.Go(func() {
						if err := c.Heartbeat(context.Background(), "x"); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			}
			mu.Lock()
			defer mu.Unlock()
			// HTTP/1.1 serves one request at a time a connection: the
			// requests in flight at once are the connections open at once.
			// A connection the transport replaced (a slow machine) is
			// another address, but never one more at a time.
			if most > tt.max || most == 0 {
				t.Fatalf("%d requests at once; want at most %d connections", most, tt.max)
			}
			if len(remotes) > 4*tt.max {
				t.Fatalf("200 requests over %d connections: not kept alive", len(remotes))
			}
		})
	}
}

func TestWithHTTPClient(t *testing.T) {
	r := newRealRegistry(t)
	var used bool
	hc := &http.Client{Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(req)
	})}
	c, err := registryclient.New(r.srv.URL, r.keyFile, registryclient.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if _, err := c.Names(context.Background()); err != nil || !used {
		t.Fatalf("Names: %v; transport used %v", err, used)
	}
	if hc.CheckRedirect != nil {
		t.Fatal("New changed the caller's http.Client")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestKeyFileChecks(t *testing.T) {
	const secret = "0123456789abcdef-secret"
	tests := []struct {
		name, content string
		mode          os.FileMode
		msg           string
	}{
		{"readable by others", secret, 0o644, "group or others"},
		{"readable by group", secret, 0o640, "group or others"},
		{"writable by group", secret, 0o620, "group or others"},
		{"empty", "", 0o600, "empty"},
		{"white space only", " \n\n", 0o600, "empty"},
		{"two words", secret + " " + secret, 0o600, "one word"},
		{"too big", strings.Repeat("k", 5000), 0o600, "over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := registryclient.New("http://127.0.0.1:9471", path)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v; want an error saying %q", err, tt.msg)
			}
			noKey(t, err, secret)
		})
	}
	dir := t.TempDir()
	if _, err := registryclient.New("http://h", filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("absent key file: %v", err)
	}
	if _, err := registryclient.New("http://h", dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory as key file: %v", err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("  "+secret+"\r\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if key, err := registryclient.ReadKey(good); err != nil || key != secret {
		t.Fatalf("ReadKey trims white space: %v", err)
	}
}
