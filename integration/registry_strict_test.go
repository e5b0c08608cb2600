package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registry/contracttest"
	"github.com/flyd-dev/flyd/registryclient"
)

// outsideRegistry is a registry the daemon registers into, not its own:
// one that follows the contract to the letter, or `flyd registry serve`.
type outsideRegistry struct {
	url, keyFile string
	setDown      func(bool)
}

func eachOutsideRegistry(t *testing.T, f func(t *testing.T, r outsideRegistry)) {
	t.Run("strict", func(t *testing.T) {
		t.Parallel()
		requireRoot(t)
		keyFile := filepath.Join(t.TempDir(), "registry.key")
		key, _, err := registry.LoadOrCreateKey(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		strict, url := contracttest.Serve(t, key)
		f(t, outsideRegistry{url: url, keyFile: keyFile, setDown: strict.SetDown})
	})
	t.Run("flyd", func(t *testing.T) {
		t.Parallel()
		requireRoot(t)
		dir := t.TempDir()
		keyFile := filepath.Join(dir, "registry.key")
		serve := []string{"--listen", "127.0.0.1:" + strconv.Itoa(freePort(t)), "--key-file", keyFile,
			"--snapshot", filepath.Join(dir, "registry.json")}
		reg := startConfRegistry(t, flydBin, dir, serve...)
		f(t, outsideRegistry{url: reg.url, keyFile: keyFile, setDown: func(down bool) {
			// Down, nothing listens; back, it has what it held.
			if down {
				reg.terminate(t)
			} else {
				reg = startConfRegistry(t, flydBin, dir, serve...)
			}
		}})
	})
}

// TestRegistrySweepAfterCrash: a workload removed while the registry was
// unreachable, by a daemon then killed before its deregister landed, is
// deregistered by the next daemon as it starts, long before its lease
// would lapse; the workload it kept stays registered throughout.
func TestRegistrySweepAfterCrash(t *testing.T) {
	t.Parallel()
	eachOutsideRegistry(t, func(t *testing.T, r outsideRegistry) {
		args := withArgs("--registry", r.url, "--registry-key-file", r.keyFile)
		d := startDaemon(t, args)
		client, err := registryclient.New(r.url, r.keyFile)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		for _, n := range []string{"kept", "removed"} {
			d.mustCLI(t, "apply", "-f", d.writeSpec(t, n+".yaml", fmt.Sprintf(
				"name: %s\ncommand: [\"@PROG@\", signals]\nendpoints: [{name: tcp, port: %d}]\nregistry: {ttl: 120s}\n", n, freePort(t))))
		}
		host, _ := os.Hostname()
		kept, removed := "flyd-"+host+"-kept-tcp", "flyd-"+host+"-removed-tcp"
		held := func() (map[string]bool, error) {
			ins, err := client.Instances(context.Background(), false)
			out := map[string]bool{}
			for _, in := range ins {
				out[in.ID] = true
			}
			return out, err
		}
		eventually(t, "both registered", func() error {
			h, err := held()
			if err == nil && (!h[kept] || !h[removed]) {
				err = fmt.Errorf("registered: %v", h)
			}
			return err
		})

		r.setDown(true)
		d.mustCLI(t, "rm", "--force", "removed")
		time.Sleep(200 * time.Millisecond) // its deregister is sent, and fails
		d.kill(t)
		r.setDown(false)
		if h, err := held(); err != nil || !h[removed] {
			t.Fatalf("the removed workload is not left registered (%v): %v", err, h)
		}

		start := time.Now()
		d2 := startDaemon(t, inDir(d.dir), args)
		eventually(t, "the removed workload's instance deregistered", func() error {
			h, err := held()
			if err == nil && h[removed] {
				err = fmt.Errorf("%s still registered", removed)
			}
			return err
		})
		t.Logf("deregistered %v after the daemon started", time.Since(start).Round(time.Millisecond))
		if h, err := held(); err != nil || !h[kept] {
			t.Fatalf("the kept workload is not registered (%v): %v", err, h)
		}
		d2.waitState(t, "kept", api.StateRunning)
		if !strings.Contains(d2.log(), "an earlier run left") {
			t.Errorf("the daemon's log does not say what it deregistered:\n%s", d2.log())
		}
	})
}

// TestRegistryPortTaken: a daemon whose embedded registry's port another
// process holds (any local user may bind it before a restart) starts all
// the same, its registry on another port of the address, which flyd
// status, its log and `flyd registry ls` follow; a workload is registered
// there.
func TestRegistryPortTaken(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	squat, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	taken := squat.Addr().String()
	d := startDaemon(t, withArgs("--registry-listen", taken))
	st, err := d.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Registry.URL == "" || st.Registry.URL == "http://"+taken || !strings.HasPrefix(st.Registry.URL, "http://127.0.0.1:") {
		t.Fatalf("registry URL %q with %s taken: want another port of 127.0.0.1", st.Registry.URL, taken)
	}
	if !strings.Contains(d.log(), "the port of --registry-listen is taken by another process") || !strings.Contains(d.log(), st.Registry.URL) {
		t.Errorf("the daemon's log does not say where its registry went:\n%s", d.log())
	}
	out := d.mustCLI(t, "status")
	if !strings.Contains(out, st.Registry.URL) {
		t.Errorf("flyd status does not show %s:\n%s", st.Registry.URL, out)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "p.yaml", fmt.Sprintf("name: p\ncommand: [\"@PROG@\", signals]\nendpoints: [{name: tcp, port: %d}]\n", freePort(t))))
	eventually(t, "the workload registered in the embedded registry", func() error {
		ins, err := d.registered(t)
		if err == nil && len(ins) != 1 {
			err = fmt.Errorf("%d registered", len(ins))
		}
		return err
	})
	// What holds the port was never spoken to.
	if tl, ok := squat.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(10 * time.Millisecond))
		if c, err := tl.Accept(); err == nil {
			c.Close()
			t.Errorf("the daemon connected to what holds %s", taken)
		}
	}
}
