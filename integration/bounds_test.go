package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	apiserver "github.com/flyd-dev/flyd/api/server"
)

// flood runs testprog's flood as uid nobody with groups, holding its
// connections while check runs, and returns its counts; req, when not
// empty, is what each connection asks (see testprog).
func flood(t *testing.T, d *daemon, n int, groups []uint32, check func(), req ...string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.prog, append([]string{"flood", d.socket, strconv.Itoa(n), "1h"}, req...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("flood: %v", err)
	}
	f := strings.Fields(line)
	counts := map[string]int{}
	for i := 0; i+1 < len(f); i += 2 {
		counts[f[i]], _ = strconv.Atoi(f[i+1])
	}
	check()
	return counts
}

// fds counts the daemon's open descriptors.
func (d *daemon) fds(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.pid()))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestConnectionFloods: 20,000 connections from a user outside the socket
// group are each refused at once and hold nothing, and a member is held
// to apiserver.MaxConns; root is served throughout.
func TestConnectionFloods(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	d := startDaemon(t, withArgs("--socket-group", "users"))
	if err := os.Chmod(d.socket, 0o666); err != nil { // reachable by all: only credentials decide
		t.Fatal(err)
	}
	rootServed := func() {
		t.Helper()
		if out := d.mustCLI(t, "ps"); !strings.Contains(out, "NAME") {
			t.Errorf("ps as root during a flood printed %q", out)
		}
		if n := d.fds(t); n > apiserver.MaxConns+200 {
			t.Errorf("the daemon holds %d descriptors during a flood", n)
		}
	}

	stranger := flood(t, d, 20000, nil, rootServed)
	if stranger["silent"] != 0 || stranger["opened"] < 1000 {
		t.Errorf("a stranger's flood: %v; want every connection refused", stranger)
	}
	member := flood(t, d, apiserver.MaxConns+100, []uint32{uint32(gid)}, rootServed)
	if member["silent"] > apiserver.MaxConns || member["503"] == 0 || member["silent"]+member["503"]+member["closed"] != member["opened"] {
		t.Errorf("a member's flood: %v; want at most %d held, the rest answered 503 or closed", member, apiserver.MaxConns)
	}
	t.Logf("stranger %v, member %v", stranger, member)
	// Once the flood is gone, the member is served again.
	eventually(t, "a member served after its flood", func() error {
		_, errOut, code := runAs(t, d.socket, 65534, 65534, []uint32{uint32(gid)}, "ps")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		return nil
	})
}

// TestPeerCannotStarveRoot: a member of the socket group that holds 70
// event streams, or 8 applies whose bodies never come, holds its own share
// and no more: root's streams and applies go on as if it were not there.
func TestPeerCannotStarveRoot(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	d := startDaemon(t, withArgs("--socket-group", "users"))
	member := []uint32{uint32(gid)}
	rootStreams := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		for range 4 {
			c, err := net.Dial("unix", d.socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(waitFor))
			fmt.Fprint(c, "GET /v1/events HTTP/1.1\r\nHost: flyd\r\n\r\n")
			if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
				t.Errorf("root's event stream during a member's flood: %q, %v", line, err)
			}
		}
		_ = ctx
	}
	streams := flood(t, d, 70, member, rootStreams, "events")
	if streams["200"] == 0 || streams["200"] > 16 || streams["503"] < 70-16 {
		t.Errorf("a member's 70 event streams: %v; want at most 16 served, the rest 503", streams)
	}
	spec := d.writeSpec(t, "w.yaml", "name: w\ncommand: [\"@PROG@\", signals]\n")
	var took time.Duration
	applies := flood(t, d, 8, member, func() {
		start := time.Now()
		d.mustCLI(t, "apply", "-f", spec)
		took = time.Since(start)
	}, "slowapply")
	if took > 5*time.Second {
		t.Errorf("root's apply took %v while a member held 8 applies (%v)", took, applies)
	}
	t.Logf("streams %v; applies %v, root's apply %v", streams, applies, took)
}

// TestSlowReaderDropped: a client that asks to follow a log and never
// reads is dropped once a write to it has waited too long.
func TestSlowReaderDropped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "loud.yaml", "name: loud\ncommand: [\"@PROG@\", print, \"100000\"]\n"))
	d.waitLog(t, "loud", "stderr line 100000")
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprint(c, "GET /v1/workloads/loud/logs?follow=1&tail=-1 HTTP/1.1\r\nHost: flyd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	d.waitStreams(t, 1)
	deadline := time.Now().Add(3 * waitFor)
	for d.streams(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a reader that never reads still holds its stream after %s", 3*waitFor)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClientTrustsOnlyRoot: a socket served by someone other than root or
// the caller gets nothing from the CLI, a spec's secrets least of all.
func TestClientTrustsOnlyRoot(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	// Not under t.TempDir, whose parent only root may enter.
	dir, err := os.MkdirTemp("", "flyd-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := dir + "/impostor.sock"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, progBin, "listen", sock)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "listening" {
		t.Fatalf("impostor: %q", lines.Text())
	}
	spec := dir + "/s.yaml"
	if err := os.WriteFile(spec, []byte("name: s\ncommand: [/bin/true]\nsecret_env: {TOKEN: hunter2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, sock, "apply", "-f", spec)
	if code != 1 || !strings.Contains(errOut, "served by uid 65534") || strings.Contains(errOut, "hunter2") {
		t.Errorf("apply to an impostor: exit %d, stderr %q; want 1, naming who serves it", code, errOut)
	}
	if !lines.Scan() || lines.Text() != "received 0 bytes" {
		t.Errorf("the impostor got %q", lines.Text())
	}
}

// TestUnsafePathsRefused: the daemon refuses to start on a state dir
// another user made (with a planted journal in it), on a workloads dir
// whose parent another user owns, and through a symlink planted at its
// lock, which it never follows.
func TestUnsafePathsRefused(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	userDir := func(name string) string {
		p := dir + "/" + name
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return p
	}
	planted := userDir("planted")
	if err := os.MkdirAll(planted+"/workloads.journal", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted+"/workloads.journal/snapshot.json", []byte(`{"seq":1,"records":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := dir + "/root-only"
	if err := os.WriteFile(secret, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, dir+"/lock.sock.lock"); err != nil {
		t.Fatal(err)
	}
	// A user's symlink to a root folder: the user would re-point it later.
	if err := os.MkdirAll(dir+"/root-state", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir+"/root-state", dir+"/their-link"); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(dir+"/their-link", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A config of a user's, naming the user's group.
	if err := os.WriteFile(dir+"/their.yaml", []byte("socket-group: nogroup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir+"/their.yaml", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	base := func(sock string) []string {
		return []string{"daemon", "--socket", dir + "/" + sock, "--state-dir", dir + "/state-" + sock, "--run-dir", dir + "/run-" + sock,
			"--registry", "off", "--workloads-dir", dir + "/wd-" + sock}
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"planted state dir", append(base("a.sock"), "--state-dir", planted), "state dir " + planted + ": " + planted + " is owned by uid 65534"},
		{"workloads dir in a user's dir", append(base("b.sock"), "--workloads-dir", userDir("theirs")+"/workloads.d"), "is owned by uid 65534"},
		{"symlinked lock", base("lock.sock"), "lock.sock.lock"},
		{"state dir through a user's symlink", append(base("c.sock"), "--state-dir", dir+"/their-link/state"), "their-link is a symlink owned by uid 65534"},
		{"a user's config", append(base("d.sock"), "--config", dir+"/their.yaml"), "config " + dir + "/their.yaml: " + dir + "/their.yaml is owned by uid 65534"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		_, errOut, code := runCmd(t, cliCmd(ctx, dir+"/none.sock", tt.args...))
		cancel()
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tt.name, code, errOut, tt.want)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "precious\n" {
		t.Errorf("the file behind the symlinked lock: %q, %v", b, err)
	}
}

// TestWorkloadsDirNeverAdopted: the daemon makes a missing workloads dir
// itself, root's and 0755; one that another user makes after it is gone
// (anyone may, under a sticky parent such as /tmp) is never read, even
// when what it holds is a root-owned file, and says why.
func TestWorkloadsDirNeverAdopted(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	d := startDaemon(t)
	wd := filepath.Join(d.dir, "workloads.d")
	fi, err := os.Stat(wd)
	if err != nil || fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("workloads dir made at start: %v, %v; want root's, 0755", fi, err)
	}
	if err := os.Remove(wd); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "x.yaml"), []byte("name: x\ncommand: [\""+d.prog+"\", signals]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(wd, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for {
		st, err := d.client.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.FileProblems) > 0 {
			if !strings.Contains(fmt.Sprint(st.FileProblems), "owned by uid 65534") {
				t.Errorf("problems %+v; want the directory's owner named", st.FileProblems)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a user's workloads dir was not reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ws, err := d.client.List(t.Context()); err != nil || len(ws) != 0 {
		t.Fatalf("workloads %+v, %v; want none from a user's directory", ws, err)
	}
}

// TestPeerUsersPolicy: with --peer-users, a member of the socket group
// that it names may run native workloads as itself, and nothing as root.
func TestPeerUsersPolicy(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", "nobody"))
	member := func(args ...string) (string, string, int) {
		return runAs(t, d.socket, 65534, 65534, []uint32{uint32(gid)}, args...)
	}
	for _, tt := range []struct {
		name, spec, want string
	}{
		{"root", "name: a\ncommand: [\"@PROG@\", signals]\nuser: root\n", `user: "root": a caller other than root runs its workloads as itself`},
		{"uid 0", "name: a\ncommand: [\"@PROG@\", signals]\nuser: \"0\"\n", `user: "0": a caller other than root runs its workloads as itself`},
		{"nix", "name: a\nkind: nix\nnix: {flake: \"path:/x\"}\ncommand: [hello]\nuser: nobody\n", "kind: a caller other than root may run only native"},
		{"in a batch", "name: b\ncommand: [\"@PROG@\", signals]\nuser: nobody\n---\nname: a\ncommand: [\"@PROG@\", signals]\nuser: root\n", `workload a: user: "root"`},
		{"a policy", "kind: policy\nname: p\nselect: {networks: [ci-x]}\ningress: []\n", "policy p: policy documents are root's"},
		{"a network document", "kind: network\nname: ci-x\negress: false\n", "network ci-x: network documents are root's"},
		{"a workspace document", "kind: workspace\nname: w\nconfiguration: {app: {mode: x}}\n", "workspace w: workspace documents are root's"},
	} {
		_, errOut, code := member("apply", "-f", d.writeSpec(t, "p.yaml", tt.spec))
		if code != 1 || !strings.Contains(errOut, "(forbidden)") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want forbidden: %s", tt.name, code, errOut, tt.want)
		}
	}
	if ws, _ := d.client.List(context.Background()); len(ws) != 0 {
		t.Errorf("refused applies left %d workloads", len(ws))
	}
	if out, errOut, code := member("apply", "-f", d.writeSpec(t, "ok.yaml", "name: ok\ncommand: [\"@PROG@\", signals]\nuser: nobody\n")); code != 0 {
		t.Errorf("a member running as nobody: exit %d, %s %s", code, out, errOut)
	}
	// Root is not limited.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "root.yaml", "name: mine\ncommand: [\"@PROG@\", signals]\n"))

	// A member's event stream holds its own workloads' events alone.
	memberEvents := cliCmd(context.Background(), d.socket, "events")
	memberEvents.Dir = "/"
	memberEvents.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{uint32(gid)}}}
	evs := startCmdStream(t, memberEvents)
	time.Sleep(200 * time.Millisecond) // subscribed
	d.mustCLI(t, "restart", "mine")
	if _, errOut, code := member("restart", "ok"); code != 0 {
		t.Fatalf("a member's restart of its own: exit %d, %s", code, errOut)
	}
	evs.waitLine(t, "the member's own restart", func(l string) bool { return strings.Contains(l, "ok") && strings.Contains(l, "running") })
	for _, l := range evs.lines() {
		if strings.Contains(l, "mine") {
			t.Errorf("a member's event stream has root's workload's event: %q", l)
		}
	}

	// A member stays in its lane: root's workloads are not its own to
	// replace, stop, signal, remove or read.
	for _, args := range [][]string{
		{"apply", "-f", d.writeSpec(t, "take.yaml", "name: mine\ncommand: [\"@PROG@\", signals]\nuser: nobody\n")},
		{"stop", "mine"}, {"restart", "mine"}, {"signal", "mine", "TERM"}, {"rm", "mine"}, {"logs", "mine"}, {"inspect", "mine"},
	} {
		if _, errOut, code := member(args...); code != 1 || !strings.Contains(errOut, "workload mine was applied by uid 0") {
			t.Errorf("%v of root's workload by a member: exit %d, %s; want forbidden", args, code, errOut)
		}
	}
	if out, errOut, code := member("ps"); code != 0 || strings.Contains(out, "mine") || !strings.Contains(out, "ok") {
		t.Errorf("ps by a member: exit %d, %q %s; want its own workload alone", code, out, errOut)
	}
	// Nor does it see root's in the lists beside them: the host's ports,
	// the usage sample, the daemon's counts.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rport.yaml", "name: rport\ncommand: [\"@PROG@\", signals]\nnetwork: ci-rport\nendpoints: [{name: http, port: ephemeral}]\n"))
	var rootPorts, memberPorts []api.PortMapping
	decodeJSON(t, d.mustCLI(t, "ports", "--json"), &rootPorts)
	if !slices.ContainsFunc(rootPorts, func(pm api.PortMapping) bool { return pm.Workload == "rport" }) {
		t.Fatalf("root's ports: %+v; want rport's", rootPorts)
	}
	out, errOut, code := member("ports", "--json")
	if code != 0 {
		t.Fatalf("ports by a member: exit %d, %s", code, errOut)
	}
	if decodeJSON(t, out, &memberPorts); len(memberPorts) != 0 {
		t.Errorf("ports by a member: %+v; want none (root's are not its own)", memberPorts)
	}
	var st api.Status
	out, errOut, code = member("status", "--json")
	if code != 0 {
		t.Fatalf("status by a member: exit %d, %s", code, errOut)
	}
	if decodeJSON(t, out, &st); st.Workloads != 1 || st.States[api.StateRunning] != 1 {
		t.Errorf("status by a member: %d workloads, states %v; want its own one, running", st.Workloads, st.States)
	}
	d.mustCLI(t, "rm", "rport")
	if out, errOut, code := member("stop", "--all"); code != 0 || strings.Contains(out, "mine") || !strings.Contains(out, "ok") {
		t.Errorf("stop --all by a member: exit %d, %q %s; want its own workload alone", code, out, errOut)
	}
	if w := d.get(t, "mine"); w.State != api.StateRunning || w.AppliedBy != 0 {
		t.Errorf("root's workload after a member's attempts: %s, applied by %d", w.State, w.AppliedBy)
	}
	if w := d.get(t, "ok"); w.AppliedBy != 65534 || w.Spec.Identity == nil || w.Spec.Identity.Workspace != "uid-65534" || w.Spec.Registry == nil || w.Spec.Registry.Name != "uid-65534.ok" {
		t.Errorf("a member's workload: applied by %d, identity %+v, registry %+v; want 65534, workspace uid-65534, registered as uid-65534.ok", w.AppliedBy, w.Spec.Identity, w.Spec.Registry)
	}
	// Nor the host's privileged ports, more endpoints than its share, or
	// another workspace.
	many := "endpoints:\n"
	for i := range 17 {
		many += fmt.Sprintf("  - {name: e%d, port: ephemeral}\n", i)
	}
	root := d.writeSpec(t, "root-net.yaml", "name: rnet\ncommand: [\"@PROG@\", signals]\nnetwork: ci-root\n")
	d.mustCLI(t, "apply", "-f", root)
	for _, tt := range []struct {
		name, spec, want string
	}{
		{"a privileged host port", "endpoints: [{name: https, port: 443}]\n", "endpoints[0].port: 443 is a privileged port"},
		{"a privileged published port", "network: ci-p\nendpoints: [{name: http, port: 8080, publish: 80}]\n", "endpoints[0].publish: 80 is a privileged port"},
		{"too many endpoints", many, "at most 16 endpoints"},
		{"root's workspace", "identity: {workspace: default, module: billing}\n", `identity.workspace: "default"`},
		{"root's network", "network: ci-root\n", "network ci-root holds workload rnet of uid 0"},
		{"root's registry name", "registry: {name: billing}\n", `registry.name: "billing"`},
		{"the edge's routing", "registry: {name: uid-65534.x, metadata: {jet.domain: voice.example}}\n", "jet.domain"},
	} {
		_, errOut, code := member("apply", "-f", d.writeSpec(t, "lane.yaml", "name: lane\ncommand: [\"@PROG@\", signals]\nuser: nobody\n"+tt.spec))
		if code != 1 || !strings.Contains(errOut, "forbidden") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, %s; want forbidden: %s", tt.name, code, errOut, tt.want)
		}
	}
	// Root opens its network to peers.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "open.yaml", "kind: network\nname: ci-root\npeers: true\n"))
	if out, errOut, code := member("apply", "-f", d.writeSpec(t, "lane.yaml", "name: lane\ncommand: [\"@PROG@\", signals]\nuser: nobody\nnetwork: ci-root\n")); code != 0 {
		t.Errorf("a member in a network root opened to peers: exit %d, %s %s", code, out, errOut)
	}
}
