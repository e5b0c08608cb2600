package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/registryclient"
)

const twoEndpoints = `
name: reg
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}, {name: admin, api: grpc, port: ephemeral}]
registry: {name: reg-svc, tags: [team=core], metadata: {jet.domain: reg.example.dev}, ttl: TTL}
`

// TestDaemonHeartbeatsIntoRegistry: a workload's two endpoints are
// registered with the contract's shape, kept alive, brought back after a
// registry outage longer than their lease that also wiped the registry,
// and deregistered when the workload stops.
func TestDaemonHeartbeatsIntoRegistry(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "registry.key")
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	serve := []string{"--listen", listen, "--key-file", keyFile, "--reap-interval", "100ms"}
	reg := startConfRegistry(t, flydBin, dir, serve...)
	d := startDaemon(t, withArgs("--registry", reg.url, "--registry-key-file", keyFile))
	client, err := registryclient.New(reg.url, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "reg.yaml", strings.Replace(twoEndpoints, "TTL", "1s", 1)))
	w := d.waitState(t, "reg", api.StateRunning)
	host, _ := os.Hostname()
	want := map[string]api.PortMapping{}
	for _, p := range w.Ports {
		want[fmt.Sprintf("flyd-%s-reg-%s", host, p.Endpoint)] = p
	}
	registered := func() (map[string]registryclient.Instance, error) {
		ins, err := client.Instances(context.Background(), false)
		got := map[string]registryclient.Instance{}
		for _, in := range ins {
			got[in.ID] = in
		}
		return got, err
	}
	both := func(what string) map[string]registryclient.Instance {
		var got map[string]registryclient.Instance
		eventually(t, what, func() error {
			var err error
			if got, err = registered(); err != nil {
				return err
			}
			for id := range want {
				if _, ok := got[id]; !ok {
					return fmt.Errorf("%s not registered (have %d)", id, len(got))
				}
			}
			return nil
		})
		return got
	}
	got := both("both endpoints registered")
	for id, p := range want {
		in := got[id]
		if in.Name != "reg-svc" || in.Address != "127.0.0.1" || in.Port != p.Port || in.Protocol != "tcp" ||
			!in.Healthy || in.TTL != int64(time.Second) {
			t.Errorf("%s: %+v", id, in)
		}
		if strings.Join(in.Tags, ",") != "api="+p.API+",team=core" {
			t.Errorf("%s tags %v", id, in.Tags)
		}
		for k, v := range map[string]string{"flyd.workload": "reg", "flyd.endpoint": p.Endpoint, "flyd.api": p.API,
			"flyd.host": host, "flyd.kind": "native", "jet.domain": "reg.example.dev"} {
			if in.Metadata[k] != v {
				t.Errorf("%s metadata %s = %q, want %q", id, k, in.Metadata[k], v)
			}
		}
	}
	eventually(t, "heartbeats renewing the lease", func() error {
		got, err := registered()
		if err != nil {
			return err
		}
		for id := range want {
			if in := got[id]; !in.UpdatedAt.After(in.RegisteredAt) {
				return fmt.Errorf("%s not heart-beaten yet", id)
			}
		}
		return nil
	})

	// An outage longer than the lease, and a registry that comes back empty.
	reg.terminate(t)
	eventually(t, "the daemon noticing the outage", func() error {
		st, err := d.client.Status(context.Background())
		if err != nil {
			return err
		}
		if st.Registry.Failing == 0 {
			return fmt.Errorf("registry status %+v", st.Registry)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // longer than the 1 s lease
	if now := d.get(t, "reg"); now.PID != w.PID || now.State != api.StateRunning {
		t.Fatalf("the outage touched the workload: %+v", now)
	}
	reg = startConfRegistry(t, flydBin, dir, serve...)
	both("both endpoints registered again after the outage and the wipe")

	// With a lease far longer than the test, an instance that disappears
	// after stop was deregistered, not expired.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "reg.yaml", strings.Replace(twoEndpoints, "TTL", "10m", 1)))
	d.waitState(t, "reg", api.StateRunning)
	both("both endpoints registered with the long lease")
	d.mustCLI(t, "stop", "reg")
	eventually(t, "both endpoints deregistered on stop", func() error {
		got, err := registered()
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("%d instances still registered", len(got))
		}
		return nil
	})
	if strings.Contains(d.log(), readKey(t, keyFile)) {
		t.Fatal("the registry key is in the daemon's log")
	}
}

func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestRegistryLsAsksTheDaemon: with no flags, `flyd registry ls` lists the
// registry the daemon on FLYD_SOCKET uses, with the key file it names,
// wherever its paths are.
func TestRegistryLsAsksTheDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "reg.yaml", strings.Replace(twoEndpoints, "TTL", "30s", 1)))
	d.waitState(t, "reg", api.StateRunning)
	var st api.Status
	decodeJSON(t, d.mustCLI(t, "status", "--json"), &st)
	if st.Registry.KeyFile != filepath.Join(d.stateDir, "registry.key") {
		t.Errorf("status names the key file %q", st.Registry.KeyFile)
	}
	host, _ := os.Hostname()
	eventually(t, "both endpoints listed", func() error {
		ins, err := d.registered(t)
		if err != nil {
			return err
		}
		ids := map[string]bool{}
		for _, in := range ins {
			ids[in.ID] = true
		}
		for _, ep := range []string{"http", "admin"} {
			if id := fmt.Sprintf("flyd-%s-reg-%s", host, ep); !ids[id] {
				return fmt.Errorf("%s not listed in %+v", id, ins)
			}
		}
		return nil
	})
	// A daemon without a registry says so instead of guessing one.
	off := startDaemon(t, withArgs("--registry", "off"))
	if _, errOut, code := runCLI(t, off.socket, "registry", "ls"); code != 1 || !strings.Contains(errOut, "registers into no registry") {
		t.Errorf("registry ls against --registry off: exit %d, %s", code, errOut)
	}
}

// registered is what `flyd registry ls --json` lists.
func (d *daemon) registered(t *testing.T) ([]registryclient.Instance, error) {
	o, errOut, code := runCLI(t, d.socket, "registry", "ls", "--json")
	if code != 0 {
		return nil, fmt.Errorf("registry ls: exit %d: %s", code, errOut)
	}
	var ins []registryclient.Instance
	return ins, json.Unmarshal([]byte(o), &ins)
}

// TestRegistryDriftAndLabels: the registrar sets the contract's topology
// labels (R5: container, service), and `flyd registry drift` reports each
// kind of drift against a reference in the export's format (R8), exiting 1
// on drift and 0 when the registry agrees.
func TestRegistryDriftAndLabels(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ports := map[string]int{}
	for _, n := range []string{"a", "b", "e"} {
		ports[n] = freePort(t)
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, n+".yaml", fmt.Sprintf(
			"name: %s\nidentity: {module: shop, service: %s-svc}\ncommand: [\"@PROG@\", signals]\nendpoints: [{name: tcp, port: %d}]\n", n, n, ports[n])))
	}
	var ins []registryclient.Instance
	eventually(t, "three instances registered", func() (err error) {
		if ins, err = d.registered(t); err == nil && len(ins) != 3 {
			err = fmt.Errorf("%d registered", len(ins))
		}
		return err
	})
	for _, in := range ins {
		if in.Metadata["container"] != in.Name || in.Metadata["service"] != in.Name+"-svc" {
			t.Errorf("%s: container %q, service %q; want the workload and its identity's service", in.Name, in.Metadata["container"], in.Metadata["service"])
		}
	}
	ref := filepath.Join(d.dir, "reference.toml")
	write := func(text string) {
		if err := os.WriteFile(ref, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unused := freePort(t)
	write(fmt.Sprintf("[[service]]\nname = \"a\"\nport = %d\ncontainer = \"a\"\n\n[[service]]\nname = \"c\"\nport = %d\n\n[[service]]\nname = \"d\"\nport = %d\n",
		ports["a"], ports["b"], unused))
	out, errOut, code := runCLI(t, d.socket, "registry", "drift", "--reference", ref)
	for _, want := range []string{
		fmt.Sprintf("owner_mismatch  %5d  want c, got b (container b)", ports["b"]),
		fmt.Sprintf("missing         %5d  d", unused),
		fmt.Sprintf("extra           %5d  e (container e)", ports["e"]),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("drift output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 || strings.Count(out, "\n") != 3 || !strings.Contains(errOut, "drifts from the reference") {
		t.Errorf("drift: exit %d, %d lines, stderr %q; want 1, three lines, the drift said", code, strings.Count(out, "\n"), errOut)
	}
	// A reference of what runs agrees.
	var agree strings.Builder
	for _, in := range ins {
		fmt.Fprintf(&agree, "[[service]]\nname = %q\nport = %d\ncontainer = %q\n", in.Name, in.Port, in.Metadata["container"])
	}
	write(agree.String())
	if out, errOut, code := runCLI(t, d.socket, "registry", "drift", "--reference", ref); code != 0 || out != "" {
		t.Errorf("an agreeing reference: exit %d, %q %s; want 0 and nothing", code, out, errOut)
	}
}
