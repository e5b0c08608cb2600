package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("fine"))
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("body-must-not-be-quoted"))
		case "/moved":
			http.Redirect(w, r, "/fail", http.StatusFound)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 1<<20)))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		url     string
		expect  int
		wantErr string // "" for healthy
		is      error
	}{
		{"200, any 2xx or 3xx", srv.URL + "/ok", 0, "", nil},
		{"200, want 200", srv.URL + "/ok", 200, "", nil},
		{"200, want 204", srv.URL + "/ok", 204, `answered "200 OK", want 204`, nil},
		{"500", srv.URL + "/fail", 0, `answered "500 Internal Server Error", want 2xx or 3xx`, nil},
		{"redirect not followed", srv.URL + "/moved", 0, "", nil},
		{"redirect, want 200", srv.URL + "/moved", 200, `"302 Found"`, nil},
		{"large body", srv.URL + "/big", 200, "", nil},
		{"timeout", srv.URL + "/slow", 0, "no answer in time", context.DeadlineExceeded},
		{"password not quoted", "http://user:hunter22@" + closedPort(t) + "/", 0, "user:xxxxx@", nil},
		{"https refused", "https://127.0.0.1:1/", 0, `scheme "https"`, errdefs.ErrInvalid},
		{"bad url", "http://[::1", 0, "invalid URL", errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			err, took := check(HTTP(nil, tt.url, tt.expect), timeout)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Check = %v, want healthy", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Check = %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("Check = %v, want it to wrap %v", err, tt.is)
			}
			for _, secret := range []string{"hunter22", "body-must-not-be-quoted"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q quotes %q", err, secret)
				}
			}
			if took > timeout+300*time.Millisecond {
				t.Fatalf("Check took %s with a %s timeout", took, timeout)
			}
		})
	}
	srv.Close()
	// The slow handler ended with the probe's connection, and the probe
	// left nothing running.
	goleak.VerifyNone(t)
}
