package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/spec"
)

// TestProbeOf: a tcp or http check reaches the port its endpoint has; an
// endpoint without one is refused; an exec check is the caller's to build.
func TestProbeOf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/up" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	port := func(addr string) int {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
		n, _ := strconv.Atoi(p)
		return n
	}
	ports := map[string]int{"db": port(l.Addr().String()), "web": port(srv.URL)}
	portOf := func(ep string) (int, bool) { p, ok := ports[ep]; return p, ok }
	errExec := errors.New("exec built")
	exec := func(argv []string) (Probe, error) {
		if len(argv) != 1 || argv[0] != "check" {
			t.Errorf("exec got %q", argv)
		}
		return nil, errExec
	}

	for _, tc := range []struct {
		name    string
		h       spec.Health
		wantErr string // of building
		healthy bool
	}{
		{name: "tcp", h: spec.Health{TCP: "db"}, healthy: true},
		{name: "http", h: spec.Health{HTTP: &spec.HTTPCheck{Endpoint: "web", Path: "/up"}}, healthy: true},
		{name: "http wrong path", h: spec.Health{HTTP: &spec.HTTPCheck{Endpoint: "web", Path: "/down"}}},
		{name: "tcp no port", h: spec.Health{TCP: "cache"}, wantErr: `endpoint "cache", which has no port`},
		{name: "http no port", h: spec.Health{HTTP: &spec.HTTPCheck{Endpoint: "api"}}, wantErr: `endpoint "api", which has no port`},
		{name: "exec", h: spec.Health{Exec: []string{"check"}}, wantErr: errExec.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ProbeOf(&tc.h, nil, portOf, exec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Check(ctx); (err == nil) != tc.healthy {
				t.Fatalf("check: %v, want healthy %v", err, tc.healthy)
			}
		})
	}
}

func TestConfigOf(t *testing.T) {
	h := &spec.Health{Interval: spec.Duration{Duration: time.Second}, Timeout: spec.Duration{Duration: 2 * time.Second},
		Failures: 4, StartPeriod: spec.Duration{Duration: time.Minute}}
	want := Config{Interval: time.Second, Timeout: 2 * time.Second, Failures: 4, StartPeriod: time.Minute}
	if got := ConfigOf(h); got != want {
		t.Fatalf("ConfigOf = %+v, want %+v", got, want)
	}
}

// TestCredential: an exec check runs as the workload's user, as nobody
// when that user lives in an image, as the daemon for root's workloads.
func TestCredential(t *testing.T) {
	for _, tc := range []struct {
		name      string
		user      string
		imageUser bool
		uid       int // -1: no credential
		wantErr   bool
	}{
		{name: "root's", uid: -1},
		{name: "host user", user: "nobody", uid: nobody},
		{name: "image user", user: "postgres-in-image", imageUser: true, uid: nobody},
		{name: "unknown user", user: "no-such-user-here", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Credential(tc.user, tc.imageUser)
			switch {
			case tc.wantErr:
				if err == nil || !strings.Contains(err.Error(), tc.user) {
					t.Fatalf("err = %v, want one naming %q", err, tc.user)
				}
			case err != nil:
				t.Fatal(err)
			case tc.uid < 0 && c != nil:
				t.Fatalf("credential %+v, want none", c)
			case tc.uid >= 0 && (c == nil || c.Uid != uint32(tc.uid)):
				t.Fatalf("credential %+v, want uid %d", c, tc.uid)
			}
		})
	}
}
