package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestNamesInNetwork: a workload reaches another of its network by the
// name its project gives it, as under docker compose (`db:8080`), and by
// its full name: each run of an isolated network has the network's
// /etc/hosts, read-only, and so has its exec check (up --wait waits for
// the client's `getent hosts db`); a run of the host's network keeps the host's;
// the file goes with the project's down.
func TestNamesInNetwork(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "names.yaml", `kind: network
name: net
---
name: db
network: net
command: ["@PROG@", serve, "127.0.0.1:8080"]
endpoints: [{name: http, port: 8080}]
health: {tcp: http, interval: 100ms}
---
name: client
network: net
after: [db]
command: [sh, -c, 'getent hosts db; getent hosts nm.db; "@PROG@" get db:8080; echo x >> /etc/hosts || echo read-only; exec sleep 600']
health: {exec: [getent, hosts, db], interval: 100ms}
---
name: onhost
command: [sh, -c, 'cat /etc/hosts; echo end of hosts; exec sleep 600']
`)
	d.mustCLI(t, "up", "-p", "nm", "-f", file, "--wait")
	out := d.waitLog(t, "nm.client", "read-only")
	for _, want := range []string{"127.0.0.1       db nm.db", "hello from testprog"} {
		if !strings.Contains(out, want) {
			t.Errorf("the client's log lacks %q:\n%s", want, out)
		}
	}
	hosts := filepath.Join(d.stateDir, "hosts", "nm.net")
	if _, err := os.Stat(hosts); err != nil {
		t.Errorf("the network's hosts file: %v", err)
	}
	own, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.waitLog(t, "nm.onhost", "end of hosts"); !strings.HasPrefix(got, string(own)) {
		t.Errorf("a run of the host's network sees\n%s\nnot the host's /etc/hosts\n%s", got, own)
	}
	// `flyd exec` in the network has its names too, read-only, and leaves
	// the host's file as it was.
	if out := d.mustCLI(t, "-p", "nm", "exec", "--network", "net", "--", "sh", "-c", "getent hosts db; echo x >> /etc/hosts || echo read-only"); !strings.Contains(out, "127.0.0.1       db nm.db") || !strings.Contains(out, "read-only") {
		t.Errorf("flyd exec --network net: getent hosts db says %q, want 127.0.0.1 for db and a read-only file", out)
	}
	if now, err := os.ReadFile("/etc/hosts"); err != nil || string(now) != string(own) {
		t.Errorf("after flyd exec the host's /etc/hosts is %q (%v), was %q", now, err, own)
	}

	// A daemon killed and started again adopts the runs with their file,
	// and removes one no run binds; a workload added to the network is
	// named in the file the running client reads (its mount namespace's,
	// through /proc/PID/root).
	ghost := filepath.Join(d.stateDir, "hosts", "ghost.net")
	if err := os.WriteFile(ghost, []byte("left\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.kill(t)
	d = startDaemon(t, inDir(d.dir))
	client := d.waitState(t, "nm.client", api.StateRunning)
	if _, err := os.Stat(ghost); !os.IsNotExist(err) {
		t.Errorf("a hosts file no run binds outlives the daemon's start: %v", err)
	}
	more := d.writeSpec(t, "more.yaml", `name: cache
network: net
command: [sleep, "600"]
`)
	d.mustCLI(t, "up", "-p", "nm", "-f", file, "-f", more, "--wait")
	eventually(t, "the client's /etc/hosts naming cache", func() error {
		seen, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hosts", client.PID))
		if err != nil {
			return err
		}
		if !strings.Contains(string(seen), "127.0.0.1\tcache nm.cache\n") {
			return fmt.Errorf("it says\n%s", seen)
		}
		return nil
	})
	// Named from its apply, before any run of it or of its network starts.
	idle := d.writeSpec(t, "idle.yaml", "name: idle\nnetwork: net\ndisabled: true\ncommand: [sleep, \"600\"]\n")
	d.mustCLI(t, "-p", "nm", "apply", "-f", idle)
	if seen, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hosts", client.PID)); err != nil || !strings.Contains(string(seen), "127.0.0.1\tidle nm.idle\n") {
		t.Errorf("after the apply of idle, the client's /etc/hosts (%v) says\n%s", err, seen)
	}
	d.mustCLI(t, "down", "-p", "nm")
	if _, err := os.Stat(hosts); !os.IsNotExist(err) {
		t.Errorf("the network's hosts file outlives its down: %v", err)
	}
}

// TestNamesInNetworkContainer: a container of the network has the same
// /etc/hosts, bound read-only, and reaches a native workload of it by
// name.
func TestNamesInNetworkContainer(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	file := d.writeSpec(t, "names.yaml", fmt.Sprintf(`kind: network
name: net
---
name: db
network: net
command: ["@PROG@", serve, "127.0.0.1:8080"]
endpoints: [{name: http, port: 8080}]
health: {tcp: http, interval: 100ms}
---
name: box
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %s}
network: net
after: [db]
command: [sh, -c, 'cat /etc/hosts; wget -q -O - http://db:8080/; echo x >> /etc/hosts || echo read-only; exec sleep 600']
`, archive))
	d.mustCLI(t, "up", "-p", "nmc", "-f", file, "--wait")
	out := d.waitLog(t, "nmc.box", "read-only")
	for _, want := range []string{"127.0.0.1\tdb nmc.db\n", "127.0.0.1\tbox nmc.box\n", "\thost.docker.internal\n", "hello from testprog"} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's log lacks %q:\n%s", want, out)
		}
	}
	d.mustCLI(t, "down", "-p", "nmc")
	if _, err := os.Stat(filepath.Join(d.stateDir, "hosts", "nmc.net")); !os.IsNotExist(err) {
		t.Errorf("the network's hosts file outlives its down: %v", err)
	}
}
