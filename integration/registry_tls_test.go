package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/registryclient"
)

// TestRegistryTLS: `flyd registry serve` on HTTPS, its etcd store on a
// real etcd that requires client certificates (--etcd-cacert, --etcd-cert,
// --etcd-key), all made by the test; `flyd registry ls` trusts the CA
// from --registry-ca or FLYD_REGISTRY_CA, and refuses the registry
// without it. Without a client certificate, serve refuses to start.
func TestRegistryTLS(t *testing.T) {
	t.Parallel()
	bin := confBinary(t)
	dir := t.TempDir()
	certs, err := etcdtest.NewCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	cluster := etcdtest.NewTLS(t, 1, certs)
	keyFile := filepath.Join(dir, "registry.key")
	etcdArgs := []string{"--store", "etcd", "--etcd-endpoints", strings.Join(cluster.Endpoints(), ","),
		"--etcd-prefix", "/flyd-test/" + filepath.Base(dir) + "/", "--etcd-cacert", certs.CA}

	// No client certificate: etcd refuses the handshake, serve refuses to start.
	out, err := exec.Command(bin, append([]string{"registry", "serve", "--listen", "127.0.0.1:0", "--key-file", keyFile,
		"--etcd-timeout", "1s"}, etcdArgs...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not answer") {
		t.Fatalf("serve without a client certificate: %v\n%s", err, out)
	}

	reg := startConfRegistry(t, bin, dir, append(etcdArgs, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey,
		"--key-file", keyFile, "--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey)...)
	url := strings.Replace(reg.url, "http://", "https://", 1)

	rc := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"registry"}, args...)...)
		cmd.Env = append(cleanEnv(), env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	// Registered through the CLI's client: ls sees it over HTTPS.
	ca := []string{"--registry-ca", certs.CA}
	if out, err := rc(nil, append([]string{"ls", "--registry", url, "--registry-key-file", keyFile}, ca...)...); err != nil || !strings.Contains(out, "NAME") {
		t.Fatalf("ls --registry-ca: %v\n%s", err, out)
	}
	mustRegisterTLS(t, url, keyFile, certs.CA)
	out2, err := rc([]string{"FLYD_REGISTRY_CA=" + certs.CA}, "ls", "--json", "--registry", url, "--registry-key-file", keyFile)
	if err != nil || !strings.Contains(out2, `"id":"tls-a"`) && !strings.Contains(out2, `"id": "tls-a"`) {
		t.Fatalf("ls with FLYD_REGISTRY_CA: %v\n%s", err, out2)
	}
	if out, err := rc(nil, "ls", "--registry", url, "--registry-key-file", keyFile); err == nil || !strings.Contains(out, "certificate") {
		t.Fatalf("ls without the CA: %v\n%s", err, out)
	}
	if _, err := os.Stat(certs.CA); err != nil {
		t.Fatal(err)
	}

	// A daemon's registrar heart-beats into it, trusting --registry-ca.
	d := startDaemon(t, withArgs("--registry", url, "--registry-key-file", keyFile, "--registry-ca", certs.CA))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "tls.yaml", "name: tlsw\ncommand: [\"@PROG@\", signals]\nendpoints: [{name: tcp, port: ephemeral}]\n"))
	eventually(t, "the daemon's workload registered over HTTPS", func() error {
		out, err := rc(nil, append([]string{"ls", "--json", "--registry", url, "--registry-key-file", keyFile}, ca...)...)
		if err != nil || !strings.Contains(out, "flyd-") || !strings.Contains(out, "tlsw") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

func mustRegisterTLS(t *testing.T, url, keyFile, ca string) {
	t.Helper()
	tc, err := registryclient.CAFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	c, err := registryclient.New(url, keyFile, registryclient.WithTLS(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := watchInstance("tls-a")
	if _, _, err := c.Register(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}
