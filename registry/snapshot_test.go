package registry

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// serve runs s on a loopback listener; stop shuts it down and returns what
// Serve returned.
func serve(t *testing.T, s *Server) (base string, stop func() error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	stopped := false
	var serr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			serr = <-done
		}
		return serr
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + l.Addr().String(), stop
}

// post sends a request over the network with the test key.
func post(t *testing.T, hc *http.Client, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFile(t *testing.T, path string, ok func(b []byte) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && ok(b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not written as expected within 5s (err %v):\n%s", path, err, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A restarted registry keeps the leases, and reaps at start what expired
// while it was down.
func TestSnapshotAcrossRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "registry.json")
	clk := newClock()
	cfg := Config{DefaultTTL: DefaultTTL, Key: testKey, Now: clk.Now, SnapshotPath: path}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, s)
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	post(t, hc, base+PathRegister, `{"id":"long","name":"a","address":"h","port":1,"tags":["x=y"],"metadata":{"jet.domain":"a.dev"}}`)
	post(t, hc, base+PathRegister, `{"id":"short","name":"b","address":"h","port":2,"ttl_ns":10000000000,"healthy":false}`)
	// Written soon after the change, while serving: a crash loses little.
	waitFile(t, path, func(b []byte) bool { return strings.Contains(string(b), `"short"`) })
	clk.Add(5 * time.Second)
	if c := post(t, hc, base+PathHeartbeat, `{"id":"long"}`); c != http.StatusOK {
		t.Fatalf("heartbeat: HTTP %d", c)
	}
	want, _ := s.mem.List(context.Background(), clk.Now(), false)
	sortInstances(want)
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %04o", fi.Mode().Perm())
	}
	if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(tmp) > 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}

	tests := []struct {
		name    string
		advance time.Duration
		ids     []string
	}{
		{"leases kept", 0, []string{"long", "short"}},
		{"expired while down", 11 * time.Second, []string{"long"}}, // short: 5s+11s > 10s
		{"all expired", DefaultTTL, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Add(tt.advance)
			s2, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, in := range s2.mem.all() { // reaped at start, not merely hidden
				ids = append(ids, in.ID)
			}
			if !reflect.DeepEqual(ids, tt.ids) {
				t.Fatalf("after restart: %v; want %v", ids, tt.ids)
			}
			for _, in := range want {
				if got, ok := s2.mem.byID[in.ID]; ok && !reflect.DeepEqual(*got, in) {
					t.Fatalf("instance changed across the restart:\n got %+v\nwant %+v", *got, in)
				}
			}
		})
	}
}

// Heart-beats alone reach the snapshot too, within leaseFlushEvery.
func TestSnapshotLeaseFlush(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "registry.json")
	clk := newClock()
	s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey, Now: clk.Now, SnapshotPath: path})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, s)
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	post(t, hc, base+PathRegister, `{"id":"a","name":"a","address":"h","port":1}`)
	waitFile(t, path, func(b []byte) bool { return strings.Contains(string(b), `"a"`) })
	clk.Add(time.Minute)
	post(t, hc, base+PathHeartbeat, `{"id":"a"}`)
	stamp := clk.Now().Format(time.RFC3339)
	waitFile(t, path, func(b []byte) bool { return strings.Contains(string(b), `"updated_at":"`+stamp) })
}

func TestSnapshotRefused(t *testing.T) {
	tests := []struct{ name, content, msg string }{
		{"corrupt", `{"version":1,"instances":[`, "corrupt"},
		{"other version", `{"version":2,"instances":[]}`, "version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "registry.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Config{Key: testKey, SnapshotPath: path})
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("New: %v; want an error saying %q", err, tt.msg)
			}
		})
	}
}

// A snapshot that cannot be written fails the final write, not the serving.
func TestSnapshotUnwritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := New(Config{Key: testKey, SnapshotPath: filepath.Join(dir, "registry.json")})
	if err != nil {
		t.Fatal(err)
	}
	// A file where the directory should be: even root cannot write there.
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stop := serve(t, s)
	if err := stop(); err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("Serve: %v; want a snapshot error", err)
	}
}
