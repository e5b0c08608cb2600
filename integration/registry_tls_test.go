package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
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

// TestRegistryEmbeddedTLS: the daemon's embedded registry on HTTPS
// (--registry-tls-cert, --registry-tls-key) with a certificate the test
// makes; the daemon's registrar registers and heart-beats over HTTPS,
// trusting --registry-ca, and `flyd registry ls` does with the CA. A
// client without the CA is refused, and so is plain HTTP; a daemon whose
// registrar would not trust its own registry's certificate refuses to
// start.
func TestRegistryEmbeddedTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certs, err := etcdtest.NewCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, withArgs("--registry-tls-cert", certs.ServerCert, "--registry-tls-key", certs.ServerKey, "--registry-ca", certs.CA))
	st, err := d.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	url, keyFile := st.Registry.URL, st.Registry.KeyFile
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("the embedded registry's URL is %q; want https://127.0.0.1:PORT", url)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "tlse.yaml",
		"name: tlse\ncommand: [\"@PROG@\", signals]\nendpoints: [{name: tcp, port: ephemeral}]\nregistry: {ttl: 1s}\n"))
	d.waitState(t, "tlse", api.StateRunning)

	tc, err := registryclient.CAFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	trusting, err := registryclient.New(url, keyFile, registryclient.WithTLS(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer trusting.Close()
	eventually(t, "the workload registered and heart-beaten over HTTPS", func() error {
		ins, err := trusting.Instances(context.Background(), false)
		if err != nil {
			return err
		}
		for _, in := range ins {
			if in.Metadata["flyd.workload"] == "tlse" && in.UpdatedAt.After(in.RegisteredAt) {
				return nil
			}
		}
		return fmt.Errorf("not registered and renewed yet: %+v", ins)
	})
	if st, err := d.client.Status(context.Background()); err != nil || st.Registry.Failing != 0 || st.Registry.Registered != 1 {
		t.Fatalf("registrar status %+v (%v)", st.Registry, err)
	}
	// flyd registry ls finds the daemon's registry; it needs the CA too.
	if out, errOut, code := runCLI(t, d.socket, "registry", "ls", "--registry-ca", certs.CA); code != 0 || !strings.Contains(out, "tlse") {
		t.Fatalf("registry ls --registry-ca: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, d.socket, "registry", "ls"); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("registry ls without the CA: exit %d, %s", code, errOut)
	}

	// Refused: a client trusting only the system's CAs, and plain HTTP.
	for _, base := range []string{url, strings.Replace(url, "https://", "http://", 1)} {
		c, err := registryclient.New(base, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Instances(context.Background(), false)
		c.Close()
		if err == nil {
			t.Fatalf("%s without the CA: listed", base)
		}
		if strings.HasPrefix(base, "https") && !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s without the CA: %v; want a certificate error", base, err)
		}
	}

	// A registrar that would not trust the certificate: the daemon says
	// so and stops, rather than failing every heartbeat.
	bad := t.TempDir()
	cmd := exec.Command(flydBin, "daemon", "--socket", filepath.Join(bad, "flyd.sock"), "--state-dir", filepath.Join(bad, "state"),
		"--run-dir", filepath.Join(bad, "run"), "--workloads-dir", filepath.Join(bad, "workloads.d"), "--cgroup-parent", cgroupParent(bad),
		"--registry-listen", "127.0.0.1:0", "--registry-tls-cert", certs.ServerCert, "--registry-tls-key", certs.ServerKey)
	cmd.Env = append(cleanEnv(), "FLYD_HOME="+bad)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not trusted") || !strings.Contains(string(out), "--registry-ca") {
		t.Fatalf("a daemon whose registrar does not trust its registry's certificate: %v\n%s", err, out)
	}
}
