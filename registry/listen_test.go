package registry

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/internal/etcdtest"
)

// Listen serves HTTPS with a certificate and key, plain HTTP without, and
// names a listener on every address by loopback; VerifyServed accepts the
// certificate only for what it names, under the CA that signed it.
func TestListen(t *testing.T) {
	certs, err := etcdtest.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	l, url, err := Listen("127.0.0.1:0", certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { _ = http.Serve(l, s.Handler()) }()
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("URL %q", url)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: client.RootCAs}}}
	resp, err := hc.Get(url + PathServices)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hc.CloseIdleConnections()
	if resp.StatusCode != http.StatusUnauthorized || resp.TLS == nil {
		t.Fatalf("HTTPS without a key: HTTP %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}

	plain, url, err := Listen("0.0.0.0:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	plain.Close()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("a listener on every address: URL %q", url)
	}
	if _, _, err := Listen("127.0.0.1:0", certs.ServerCert, ""); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}

	if err := VerifyServed(certs.ServerCert, certs.ServerKey, client.RootCAs, "127.0.0.1"); err != nil {
		t.Fatalf("under its CA, for 127.0.0.1: %v", err)
	}
	for _, tt := range []struct{ host, why string }{{"10.9.9.9", "an address it does not name"}, {"example.com", "a name it does not name"}} {
		if err := VerifyServed(certs.ServerCert, certs.ServerKey, client.RootCAs, tt.host); err == nil {
			t.Errorf("accepted for %s", tt.why)
		}
	}
	if err := VerifyServed(certs.ServerCert, certs.ServerKey, nil, "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("under the system's CAs: %v", err)
	}
}
