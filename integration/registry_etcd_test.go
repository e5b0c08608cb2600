package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/registryclient"
)

// TestDaemonFailsOverBetweenEtcdReplicas: two `flyd registry serve
// --store etcd` processes on one real 3-member etcd are one registry; a
// daemon given both registers into it, and when the replica it used
// dies, goes on heart-beating through the other, its instances never
// lapsing.
func TestDaemonFailsOverBetweenEtcdReplicas(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	cluster := etcdtest.New(t, 3)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "registry.key")
	serve := []string{"--store", "etcd", "--etcd-endpoints", strings.Join(cluster.Endpoints(), ","),
		"--etcd-prefix", "/flyd-test/" + filepath.Base(dir) + "/", "--key-file", keyFile}
	first := startConfRegistry(t, flydBin, dir, serve...)
	second := startConfRegistry(t, flydBin, dir, serve...)
	d := startDaemon(t, withArgs("--registry", first.url+","+second.url, "--registry-key-file", keyFile))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "reg.yaml", strings.Replace(twoEndpoints, "TTL", "2s", 1)))
	d.waitState(t, "reg", api.StateRunning)

	viaSecond, err := registryclient.New(second.url, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer viaSecond.Close()
	count := func() (int, error) {
		ins, err := viaSecond.Instances(context.Background(), false)
		return len(ins), err
	}
	eventually(t, "both endpoints registered, seen through the other replica", func() error {
		if n, err := count(); err != nil || n != 2 {
			return fmt.Errorf("%d instances (%v)", n, err)
		}
		return nil
	})

	first.terminate(t)
	// Three leases' worth: only heartbeats through the second replica
	// keep them.
	before := heartbeats(t, d)
	eventually(t, "heartbeats through the second replica", func() error {
		if hb := heartbeats(t, d); hb < before+6 {
			return fmt.Errorf("%d heartbeats since the first replica died", hb-before)
		}
		return nil
	})
	if n, err := count(); err != nil || n != 2 {
		t.Fatalf("after the first replica died: %d instances (%v), want 2", n, err)
	}
	d.mustCLI(t, "stop", "reg")
	eventually(t, "deregistered through the second replica", func() error {
		if n, err := count(); err != nil || n != 0 {
			return fmt.Errorf("%d instances (%v)", n, err)
		}
		return nil
	})
}

func heartbeats(t *testing.T, d *daemon) uint64 {
	t.Helper()
	st, err := d.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Registry.Heartbeats
}
