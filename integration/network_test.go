package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/journal"
)

// TestIsolatedNetworksShareAPort: two networks each run a server on the
// same fixed port at once; each is reachable inside its network through
// `flyd exec`, and neither from the host's loopback.
func TestIsolatedNetworksShareAPort(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	port := freePort(t)
	for _, net := range []string{"ci-a", "ci-b"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, net+".yaml", fmt.Sprintf(`
name: srv-%s
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: %d}]
network: %s
`, net, port, net)))
	}
	pids := map[string]int{}
	for _, net := range []string{"ci-a", "ci-b"} {
		w := d.waitState(t, "srv-"+net, api.StateRunning)
		pids[net] = w.PID
		if len(w.Ports) != 1 || w.Ports[0].Port != port || w.Ports[0].Network != net {
			t.Fatalf("srv-%s ports = %+v", net, w.Ports)
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, net := range []string{"ci-a", "ci-b"} {
		eventually(t, "srv-"+net+" answering inside "+net, func() error {
			out, errOut, code := runCLI(t, d.socket, "exec", "--network", net, "--", d.prog, "get", addr)
			if code != 0 {
				return fmt.Errorf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, fmt.Sprintf("pid=%d\n", pids[net])) {
				return fmt.Errorf("answered by someone else: %q", out)
			}
			return nil
		})
	}
	if _, err := httpGet(addr, "/"); err == nil {
		t.Fatal("an isolated server answered on the host's loopback")
	}
	// The exit status of the command passes through flyd exec.
	if _, _, code := runCLI(t, d.socket, "exec", "--network", "ci-a", "--", d.prog, "exit", "7"); code != 7 {
		t.Fatalf("flyd exec exit status %d, want 7", code)
	}

	// A network in use cannot be deleted; it goes with its last workload.
	if _, errOut, code := runCLI(t, d.socket, "networks", "rm", "ci-a"); code != 1 || !strings.Contains(errOut, "conflict") {
		t.Fatalf("deleting a network in use: exit %d, %s", code, errOut)
	}
	d.mustCLI(t, "rm", "srv-ci-a")
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || nets[0].Name != "ci-b" {
		t.Fatalf("networks after removing ci-a's last workload: %+v", nets)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "run", "netns", "ci-a")); !os.IsNotExist(err) {
		t.Fatalf("ci-a's namespace file is still there: %v", err)
	}
}

// TestEphemeralPortsAcrossNetworks: 50 workloads with ephemeral ports,
// applied at once across five networks, all bind, and no two of one
// network share a port.
func TestEphemeralPortsAcrossNetworks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := filepath.Join(d.dir, "specs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		spec := fmt.Sprintf(`name: eph-%d
command: ["@PROG@", "serve", "${ADDR_HTTP}"]
endpoints: [{name: http, api: http, port: ephemeral}]
network: par-%d
restart: {policy: never}
`, i, i%5)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("eph-%d.yaml", i)), []byte(strings.ReplaceAll(spec, "@PROG@", d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.mustCLI(t, "apply", "-f", dir)
	seen := map[string]string{}
	var mu sync.Mutex
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("eph-%d", i)
		w := d.waitState(t, name, api.StateRunning)
		d.waitLog(t, name, "serving on")
		p := w.Ports[0]
		key := p.Network + ":" + strconv.Itoa(p.Port)
		mu.Lock()
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s both hold port %d in %s", other, name, p.Port, p.Network)
		}
		seen[key] = name
		mu.Unlock()
	}
	// Still all running: none lost a bind race and exited.
	var ws []api.Workload
	decodeJSON(t, d.mustCLI(t, "ps", "--json"), &ws)
	for _, w := range ws {
		if w.State != api.StateRunning || w.Restarts != 0 {
			t.Errorf("%s: %s after %d restarts: %s", w.Name, w.State, w.Restarts, w.LastError)
		}
	}
}

// TestPortConflicts: a port another workload holds, or a process flyd does
// not manage listens on, is refused at apply with port_in_use naming the
// holder, and nothing is left behind.
func TestPortConflicts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	file := d.writeSpec(t, "c.yaml", fmt.Sprintf("name: clash\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: %d}]\n", taken))
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
	if code != 1 || !strings.Contains(errOut, "port_in_use") || !strings.Contains(errOut, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a port this test listens on: exit %d, %s", code, errOut)
	}

	port := freePort(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "a.yaml", fmt.Sprintf("name: first\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: %d}]\n", port)))
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "b.yaml", fmt.Sprintf("name: second\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: %d}]\nnetwork: lonely\n", port)))
	if code != 0 {
		t.Fatalf("the same port in another network must be fine: %s", errOut)
	}
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "c2.yaml", fmt.Sprintf("name: third\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: %d}]\nnetwork: other\n", taken)))
	if code != 0 {
		t.Fatalf("a host port is free inside an isolated network: %s", errOut)
	}
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "d.yaml", fmt.Sprintf("name: fourth\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: %d}]\n", port)))
	if code != 1 || !strings.Contains(errOut, "port_in_use") || !strings.Contains(errOut, "first") {
		t.Fatalf("a port workload first holds: exit %d, %s", code, errOut)
	}
	var ws []api.Workload
	decodeJSON(t, d.mustCLI(t, "ps", "--json"), &ws)
	if len(ws) != 3 {
		t.Fatalf("%d workloads, want first, second and third only", len(ws))
	}
	// A refused apply in a new network leaves no network behind.
	_, _, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "e.yaml", fmt.Sprintf("name: fifth\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: a, port: %d}, {name: b, port: %d}]\nnetwork: doomed\n", port, port)))
	if code != 1 {
		t.Fatal("two endpoints on one port must be refused")
	}
	if _, err := os.Stat(filepath.Join(d.dir, "run", "netns", "doomed")); !os.IsNotExist(err) {
		t.Fatal("a refused apply left its network behind")
	}
}

// TestNetworksSweptAtStart: a namespace no spec names (a daemon killed
// between creating it and recording its workload) is deleted by the next
// daemon; one a spec names is kept with its workload running.
func TestNetworksSweptAtStart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "k.yaml", "name: keeper\ncommand: [\"@PROG@\", \"serve\", \"${ADDR_HTTP}\"]\nendpoints: [{name: http, port: ephemeral}]\nnetwork: kept\n"))
	before := d.waitState(t, "keeper", api.StateRunning)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "g.yaml", "name: goner\ncommand: [\"@PROG@\", \"print\", \"1\"]\nnetwork: stray\n"))
	d.waitState(t, "goner", api.StateRunning)
	var linked []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &linked)
	index := linkIndexes(t, linked)
	d.kill(t)
	// The spec of goner is lost while no daemon runs.
	j, _, err := journal.Open(filepath.Join(d.dir, "state", "workloads.journal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Delete("goner"); err != nil {
		t.Fatal(err)
	}
	j.Close()
	d2 := startDaemon(t, inDir(d.dir))
	after := d2.waitState(t, "keeper", api.StateRunning)
	if after.PID != before.PID || after.Ports[0].Port != before.Ports[0].Port {
		t.Fatalf("keeper: pid %d→%d, port %d→%d; want both kept", before.PID, after.PID, before.Ports[0].Port, after.Ports[0].Port)
	}
	var nets []api.Network
	decodeJSON(t, d2.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || nets[0].Name != "kept" {
		t.Fatalf("networks after restart: %+v", nets)
	}
	// The gone network's link went with it; the kept one's stayed as it was.
	for _, n := range linked {
		_, gone := net.InterfaceByIndex(index[n.Name])
		_, err := net.InterfaceByName(n.Link)
		switch {
		case n.Name == "stray" && gone == nil:
			t.Errorf("the link %s of the swept network stray is still there", n.Link)
		case n.Name == "kept" && (err != nil || n.Link != nets[0].Link || n.Address != nets[0].Address):
			t.Errorf("kept's link: before %+v, after %+v (%v)", n, nets[0], err)
		}
	}
}

// TestExecKeepsTheCommandsFlags: what follows `--` is the command's, flags
// that flyd also knows included; exec's own flags end at its command.
func TestExecKeepsTheCommandsFlags(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	inode := map[string]string{}
	for _, net := range []string{"ci-1", "ci-2"} {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, net+".yaml", fmt.Sprintf(`
name: idle-%s
command: ["@PROG@", "signals"]
network: %s
`, net, net)))
		d.waitState(t, "idle-"+net, api.StateRunning)
		fi, err := os.Stat(filepath.Join(d.runDir, "netns", net))
		if err != nil {
			t.Fatal(err)
		}
		inode[net] = fmt.Sprintf("net:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
	}
	tests := []struct {
		args   []string
		stdout string // exact, unless empty
		code   int
	}{
		{[]string{"--network", "ci-1", "--", "sh", "-c", "echo hi"}, "hi\n", 0},
		{[]string{"--network", "ci-1", "--", "echo", "-json", "hi"}, "-json hi\n", 0},
		{[]string{"--network", "ci-1", "echo", "-json", "hi"}, "-json hi\n", 0},
		{[]string{"--network", "ci-1", "--", "readlink", "/proc/self/ns/net"}, inode["ci-1"] + "\n", 0},
		{[]string{"--network", "ci-2", "--", "sh", "-c", "readlink /proc/self/ns/net"}, inode["ci-2"] + "\n", 0},
		// readlink gets -network as its own (invalid) options and says so;
		// it must not run in ci-2.
		{[]string{"--network", "ci-1", "--", "readlink", "-network", "ci-2", "/proc/self/ns/net"}, "", 1},
	}
	for _, tt := range tests {
		out, errOut, code := runCLI(t, d.socket, append([]string{"exec"}, tt.args...)...)
		if code != tt.code || (tt.stdout != "" && out != tt.stdout) {
			t.Errorf("flyd exec %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", tt.args, code, out, errOut, tt.code, tt.stdout)
		}
		if strings.Contains(out, inode["ci-2"]) && tt.args[1] == "ci-1" {
			t.Errorf("flyd exec %q ran in ci-2", tt.args)
		}
	}
}

// linkIndexes finds the interface index of each network's host link.
// Links are named by their place in the pool, which the daemons of other
// tests share: a name freed may be taken at once, the index is the link's
// own.
func linkIndexes(t *testing.T, nets []api.Network) map[string]int {
	t.Helper()
	index := map[string]int{}
	for _, n := range nets {
		ifc, err := net.InterfaceByName(n.Link)
		if err != nil {
			t.Fatalf("the link of network %s: %v", n.Name, err)
		}
		index[n.Name] = ifc.Index
	}
	return index
}
