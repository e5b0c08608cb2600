package registryclient_test

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"net/http/httptest"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// TestHTTPSRegistryWithCA: an https:// registry is reached when the
// client trusts the CA given, and refused otherwise.
func TestHTTPSRegistryWithCA(t *testing.T) {
	path, key := keyFile(t)
	s, err := registry.New(registry.Config{DefaultTTL: registry.DefaultTTL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(s.Handler())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err := registryclient.CAFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	c, err := registryclient.New(srv.URL, path, registryclient.WithTLS(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Register(context.Background(), inst("a")); err != nil {
		t.Fatalf("register over https with the CA: %v", err)
	}
	untrusting, err := registryclient.New(srv.URL, path)
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if _, err := untrusting.Names(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v; want a certificate error", err)
	}
	if _, err := registryclient.CAFile(path); err == nil {
		t.Fatal("a CA file without a certificate was taken")
	}
}
