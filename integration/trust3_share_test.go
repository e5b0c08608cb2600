package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// curlAs sends one request to the daemon's API as u, a member of the
// socket's group gid, with curl: the body is the file at body ("" for
// none), sent chunked when chunked says so. It answers curl's stdout
// (the answer's body) and stderr.
func (d *daemon) curlAs(t *testing.T, u peerUser, gid int, method, path, body string, chunked bool) (string, string) {
	t.Helper()
	args := []string{"-sS", "--max-time", "60", "--unix-socket", d.socket, "-X", method, "-H", "Content-Type: application/json"}
	if body != "" {
		args = append(args, "--data-binary", "@"+body)
	}
	if chunked {
		args = append(args, "-H", "Transfer-Encoding: chunked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", append(args, "http://flyd"+path)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{uint32(gid)}}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	return out.String(), errOut.String()
}

// peakRSS is the most memory the process pid has held (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	n, _ := strconv.ParseInt(procStatus(t, pid, "VmHWM"), 10, 64)
	return n << 10
}

// logBytes is what the log files of workload name hold on disk: the
// live file, its generations and its index.
func (d *daemon) logBytes(t *testing.T, name string) int64 {
	t.Helper()
	fs, err := filepath.Glob(filepath.Join(d.stateDir, "logs", name+".log*"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range fs {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestTrustPeerShare (issue 49, High 3): a peer holds a share of the
// host, and root is never counted in it. The attack: more workloads than
// its share, one at a time, in a batch and in one project body, is
// refused naming the share, its number and its flag, and a removal gives
// the share back; specs over its bytes are refused; project bodies of
// 15 MB are refused by their length, four at once, before they are read
// (the daemon's peak memory stays where it was), and a chunked one once
// it passes the bound; workloads writing their logs as fast as they can
// keep the peer's share of the disk in all.
func TestTrustPeerShare(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name,
		"--peer-max-workloads", "4", "--peer-max-spec-bytes", "48Ki", "--peer-max-body", "64Ki", "--peer-max-log-bytes", "4Mi"))
	peer := func(args ...string) (string, string, int) { return d.as(t, p1, gid, args...) }
	mustPeer := func(args ...string) { t.Helper(); d.mustAs(t, p1, gid, args...) }
	refused := func(what, want string, args ...string) { t.Helper(); wantRefused(t, what, want, peer, args...) }
	const share = "a caller other than root holds at most 4, its share (--peer-max-workloads)"

	// Workloads: four that flood their logs, then a fifth, one at a time.
	for i := 1; i <= 4; i++ {
		mustPeer("apply", "-f", d.writeSpec(t, fmt.Sprintf("w%d.yaml", i), fmt.Sprintf("name: w%d\ncommand: [yes, \"a line of peer w%d's log, written as fast as it goes\"]\n", i, i)))
	}
	refused("the peer's fifth workload", fmt.Sprintf("uid %d would hold 5 workloads: %s", p1.uid, share),
		"apply", "-f", d.writeSpec(t, "w5.yaml", "name: w5\ncommand: [\"@PROG@\", signals]\n"))
	// Root is never counted: ten of its own, and the peer is no nearer.
	for i := 1; i <= 10; i++ {
		d.mustCLI(t, "apply", "-f", d.writeSpec(t, fmt.Sprintf("r%d.yaml", i), fmt.Sprintf("name: r%d\ncommand: [\"@PROG@\", signals]\n", i)))
	}
	// A group's replicas count one each; a batch, and a project's body,
	// count whole before any of it is made.
	refused("the peer's group of 3", "would hold 7 workloads", "apply", "-f", d.writeSpec(t, "g.yaml", "name: g\ncommand: [\"@PROG@\", signals]\nreplicas: 3\n"))
	many := filepath.Join(d.dir, "many")
	if err := os.MkdirAll(many, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("m%d.yaml", i)), []byte(fmt.Sprintf("name: m%d\ncommand: [\"%s\", signals]\n", i, d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused("the peer's batch of 20", "this change is 20 workloads", "apply", "-f", many)
	refused("the peer's project of 20", "this change is 20 workloads", "up", "-p", "big", "-f", many)
	for _, n := range []string{"w5", "g-1", "m0", "big.m0"} {
		if _, err := d.client.Get(t.Context(), n); err == nil {
			t.Errorf("a refused change left %s", n)
		}
	}

	// Logs: the four have written as fast as they could; the peer's
	// share of the disk is 4 MiB in all, 1 MiB a workload.
	time.Sleep(3 * time.Second)
	var total int64
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("w%d", i)
		if got := d.logBytes(t, n); got > 1<<20+64<<10 {
			t.Errorf("the peer's %s keeps %d bytes of log; its share is 1 MiB (--peer-max-log-bytes 4Mi / --peer-max-workloads 4)", n, got)
		}
		total += d.logBytes(t, n)
	}
	t.Logf("the peer's four flooding workloads keep %d bytes of log", total)
	if total > 4<<20+256<<10 {
		t.Errorf("the peer's workloads keep %d bytes of log; its share is 4 MiB", total)
	}
	// A removal gives the share back.
	mustPeer("rm", "w4", "w3")
	mustPeer("apply", "-f", d.writeSpec(t, "w5.yaml", "name: w5\ncommand: [\"@PROG@\", signals]\n"))

	// Spec bytes: 48 KiB in all, as inspect shows them.
	mustPeer("rm", "w5")
	big := func(name string) string {
		return d.writeSpec(t, name+".yaml", fmt.Sprintf("name: %s\ncommand: [\"@PROG@\", signals]\nenv: {PAD: %q}\n", name, strings.Repeat("x", 30<<10)))
	}
	mustPeer("apply", "-f", big("s1"))
	refused("the peer's second spec of 30 KiB", "a caller other than root holds at most 49152, its share (--peer-max-spec-bytes)", "apply", "-f", big("s2"))

	// Bodies: 15 MB project bodies, four at once, are refused by their
	// length; the daemon's peak memory stays where it was.
	body := filepath.Join(d.dir, "body.json")
	doc, _ := json.Marshal(map[string]any{"workloads": []map[string]any{{"name": "b", "command": []string{"/bin/true"}, "env": map[string]string{"PAD": strings.Repeat("y", 15<<20)}}}})
	if err := os.WriteFile(body, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	pid := d.cmd.Process.Pid
	before := peakRSS(t, pid)
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut := d.curlAs(t, p1, gid, "PUT", fmt.Sprintf("/v1/projects/big%d", i), body, false)
			outs[i] = out + errOut
		}()
	}
	wg.Wait()
	grown := peakRSS(t, pid) - before
	t.Logf("four 15 MB project bodies at once: the daemon's peak memory grew %d KiB", grown>>10)
	want := fmt.Sprintf("a request body of uid %d is at most 65536 bytes, its share (--peer-max-body); this one is %d bytes", p1.uid, len(doc))
	for i, out := range outs {
		if !strings.Contains(out, want) || !strings.Contains(out, `"code":"too_large"`) {
			t.Errorf("the peer's project body %d: %s; want too_large: %s", i, out, want)
		}
	}
	if grown > 8<<20 {
		t.Errorf("four refused 15 MB bodies grew the daemon's peak memory by %d KiB", grown>>10)
	}
	// A body that does not say its length is refused once it passes the
	// bound.
	out, errOut := d.curlAs(t, p1, gid, "PUT", "/v1/projects/chunked", body, true)
	if !strings.Contains(out, "its share (--peer-max-body); this one is longer") {
		t.Errorf("the peer's chunked project body: %s %s; want too_large, naming --peer-max-body", out, errOut)
	}
	// Root's bodies keep root's bound.
	if out, _ := d.curlAs(t, peerUser{name: "root"}, gid, "PUT", "/v1/projects/rootbig", body, false); strings.Contains(out, `"code":"too_large"`) {
		t.Errorf("root's 15 MB project body: %s; want it read", out)
	}
	if w := d.get(t, "r1"); w.State != api.StateRunning {
		t.Errorf("root's r1 after the peer's attack: %s", w.State)
	}
}

// TestTrustPeerSeesItsOwn (issue 49, Low): a peer reads its own lane of
// the networks, workspaces and reach, no policy (root's), and neither
// /metrics nor the profiles (root's, the CPU profiler held by one caller
// at a time); a scale of root's workload is refused naming who applied
// it, and shows nothing of its spec.
func TestTrustPeerSeesItsOwn(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "root.yaml", `name: rootweb
command: ["@PROG@", signals]
network: rootnet
env: {ROOT_ONLY: root-env-value}
endpoints: [{name: http, port: 8080, publish: ephemeral}]
---
kind: policy
name: rootpolicy
select: {workloads: [rootweb]}
ingress: [{from: {users: true}}]
---
kind: workspace
name: rootspace
configuration: {aws: {region: root-region}}
---
kind: workspace
name: uid-`+strconv.Itoa(int(p1.uid))+`
configuration: {aws: {region: peer-region}}
`))
	d.waitState(t, "rootweb", api.StateRunning)
	if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "peer.yaml", "name: peerweb\ncommand: [\"@PROG@\", signals]\nnetwork: peernet\nendpoints: [{name: http, port: 8080, publish: ephemeral}]\n")); code != 0 {
		t.Fatalf("the peer's apply: exit %d, %s", code, errOut)
	}
	d.waitState(t, "peerweb", api.StateRunning)

	for _, path := range []string{"/v1/networks", "/v1/policies", "/v1/workspaces", "/v1/reach"} {
		out, errOut := d.curlAs(t, p1, gid, "GET", path, "", false)
		for _, root := range []string{"rootweb", "rootnet", "rootpolicy", "rootspace", "root-region"} {
			if strings.Contains(out, root) {
				t.Errorf("the peer's GET %s shows root's %s: %s %s", path, root, out, errOut)
			}
		}
		if path == "/v1/networks" && !strings.Contains(out, "peerweb") || path == "/v1/workspaces" && !strings.Contains(out, "peer-region") {
			t.Errorf("the peer's GET %s leaves out its own: %s %s", path, out, errOut)
		}
	}
	if out, _ := d.curlAs(t, p1, gid, "GET", "/v1/reach?name=rootweb", "", false); !strings.Contains(out, "forbidden") {
		t.Errorf("the peer's reach of rootweb: %s; want forbidden", out)
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/profile?seconds=1"} {
		if out, _ := d.curlAs(t, p1, gid, "GET", path, "", false); !strings.Contains(out, "forbidden") || strings.Contains(out, "flyd_") {
			t.Errorf("the peer's GET %s: %.300s; want forbidden", path, out)
		}
	}
	// Root reads them all.
	if out, _ := d.curlAs(t, peerUser{name: "root"}, gid, "GET", "/v1/networks", "", false); !strings.Contains(out, "rootweb") || !strings.Contains(out, "peerweb") {
		t.Errorf("root's GET /v1/networks: %s", out)
	}
	if out, _ := d.curlAs(t, peerUser{name: "root"}, gid, "GET", "/metrics", "", false); strings.Contains(out, "forbidden") {
		t.Errorf("root's GET /metrics: %.300s", out)
	}
	out, errOut, code := d.as(t, p1, gid, "scale", "rootweb", "3")
	if code == 0 || !strings.Contains(errOut, "forbidden") || strings.Contains(out+errOut, "root-env-value") || strings.Contains(out+errOut, "ROOT_ONLY") {
		t.Errorf("the peer's scale of rootweb: exit %d, %s %s; want forbidden, nothing of its spec", code, out, errOut)
	}
}

// TestWorkloadLoginLimits (issue 49, Low): a workload starts with the
// open files limit a login has (soft 1024, the hard one at most 524288),
// not the daemon's, whoever applied it, whatever limit the daemon was
// started with (here the test's, soft as high as hard, as a unit's
// LimitNOFILE=N sets them).
func TestWorkloadLoginLimits(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	wantHard := min(rl.Max, 524288)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	limits := "command: [/bin/sh, -c, 'echo files $(ulimit -Sn):$(ulimit -Hn)']\nrestart: {policy: never}\n"
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rlim.yaml", "name: rlim\n"+limits))
	if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "plim.yaml", "name: plim\n"+limits)); code != 0 {
		t.Fatalf("the peer's apply: exit %d, %s", code, errOut)
	}
	want := fmt.Sprintf("files 1024:%d", wantHard)
	for _, n := range []string{"rlim", "plim"} {
		d.waitState(t, n, api.StateExited)
		if got := d.logs(t, n); !strings.Contains(got, want) {
			t.Errorf("%s's open files limit: %q; want %s (the daemon's: %d:%d)", n, got, want, rl.Cur, rl.Max)
		}
	}
	// The daemon keeps a limit of its own for what it holds.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "Max" && f[1] == "open" {
			if soft, _ := strconv.ParseUint(f[3], 10, 64); soft < wantHard-1 {
				t.Errorf("the daemon's own open files limit: %s; want %d", l, wantHard-1)
			}
		}
	}
}
