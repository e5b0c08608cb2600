package integration

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// peerUser is a user of this host that a test makes a peer of the
// daemon: the CLI runs with its uid and gid, and the socket's group.
type peerUser struct {
	name     string
	uid, gid uint32
}

// peerUsers are the users the trust tests run the CLI as: two peers
// (Debian's www-data and games) and nobody, which root's workloads run
// as. The test skips where the host has none of them.
func peerUsers(t *testing.T) (p1, p2, nobody peerUser) {
	t.Helper()
	get := func(name string) peerUser {
		u, err := user.Lookup(name)
		if err != nil {
			t.Skipf("no user %s on this host to run the CLI as: %v", name, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return peerUser{name: name, uid: uint32(uid), gid: uint32(gid)}
	}
	return get("www-data"), get("games"), get("nobody")
}

// as runs the CLI as u, a member of the socket's group gid.
func (d *daemon) as(t *testing.T, u peerUser, gid int, args ...string) (string, string, int) {
	t.Helper()
	return runAs(t, d.socket, u.uid, u.gid, []uint32{uint32(gid)}, args...)
}

// mustAs runs the CLI as u and fails the test unless it exits 0.
func (d *daemon) mustAs(t *testing.T, u peerUser, gid int, args ...string) {
	t.Helper()
	if _, errOut, code := d.as(t, u, gid, args...); code != 0 {
		t.Fatalf("uid %d's %v: exit %d, %s", u.uid, args, code, errOut)
	}
}

// wantRefused fails t unless run(args) exits non-zero saying want.
func wantRefused(t *testing.T, what, want string, run func(args ...string) (string, string, int), args ...string) {
	t.Helper()
	out, errOut, code := run(args...)
	if code == 0 || !strings.Contains(out+errOut, want) {
		t.Errorf("%s: exit %d, %s %s; want refused: %s", what, code, out, errOut, want)
	}
}

// procUID is the real uid of a running workload's process.
func procUID(t *testing.T, pid int) uint32 {
	t.Helper()
	n, _ := strconv.ParseUint(procStatus(t, pid, "Uid"), 10, 32)
	return uint32(n)
}

// procStatus is the first value of a line of /proc/PID/status.
func procStatus(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == key+":" {
			return f[1]
		}
	}
	t.Fatalf("no %s line in /proc/%d/status", key, pid)
	return ""
}

// TestTrustPeerRunsAsItself (issue 49, High 1): a peer that applies a
// workload as another peer's user, or as nobody that root's workloads run
// as, is refused; its workloads run as its own uid, with `user:` absent
// or naming itself. A member of the socket group that --peer-users does
// not name runs nothing. Root still runs as anyone.
func TestTrustPeerRunsAsItself(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, p2, nobody := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name+","+p2.name))

	// Root's workload as nobody, with a secret in its environment.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rnob2.yaml", "name: rnob2\ncommand: [\"@PROG@\", signals]\nuser: nobody\nsecret_env: {TOKEN: hunter2}\n"))
	if w := d.waitState(t, "rnob2", api.StateRunning); procUID(t, w.PID) != nobody.uid {
		t.Fatalf("root's rnob2 runs as uid %d; want nobody", procUID(t, w.PID))
	}
	// The second peer's own workload, with no user: it runs as itself.
	if _, errOut, code := d.as(t, p2, gid, "apply", "-f", d.writeSpec(t, "p2w.yaml", "name: p2w\ncommand: [\"@PROG@\", signals]\nsecret_env: {TOKEN: p2-secret}\n")); code != 0 {
		t.Fatalf("%s's apply: exit %d, %s", p2.name, code, errOut)
	}
	if w := d.waitState(t, "p2w", api.StateRunning); procUID(t, w.PID) != p2.uid || w.Spec.User != p2.name {
		t.Errorf("%s's p2w runs as uid %d, user %q; want %d, %s", p2.name, procUID(t, w.PID), w.Spec.User, p2.uid, p2.name)
	}

	// The attack: the first peer runs as the second peer, as nobody, as
	// root. Each is refused, naming the field, and nothing runs.
	for _, as := range []string{p2.name, strconv.Itoa(int(p2.uid)), "nobody", "root", "0"} {
		_, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "steal.yaml", fmt.Sprintf("name: steal\ncommand: [\"@PROG@\", signals]\nuser: %q\n", as)))
		if code != 1 || !strings.Contains(errOut, "(forbidden)") || !strings.Contains(errOut, "user: \""+as+"\": a caller other than root runs its workloads as itself, "+p1.name) {
			t.Errorf("%s applying a workload as %s: exit %d, %s; want forbidden, field user", p1.name, as, code, errOut)
		}
	}
	if _, err := d.client.Get(t.Context(), "steal"); err == nil {
		t.Errorf("a refused apply left workload steal")
	}
	// As itself, by name, by uid, or with no user.
	for i, as := range []string{"", "user: " + p1.name + "\n", fmt.Sprintf("user: \"%d\"\n", p1.uid)} {
		name := fmt.Sprintf("own%d", i)
		if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, name+".yaml", "name: "+name+"\ncommand: [\"@PROG@\", signals]\n"+as)); code != 0 {
			t.Fatalf("%s's apply of %q: exit %d, %s", p1.name, as, code, errOut)
		}
		if w := d.waitState(t, name, api.StateRunning); procUID(t, w.PID) != p1.uid {
			t.Errorf("%s's %s (%q) runs as uid %d; want %d", p1.name, name, as, procUID(t, w.PID), p1.uid)
		}
	}
	// A member that is no peer user runs nothing, not even as itself.
	_, errOut, code := d.as(t, nobody, gid, "apply", "-f", d.writeSpec(t, "nob.yaml", "name: nob\ncommand: [\"@PROG@\", signals]\nuser: nobody\n"))
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("user: uid %d is not a peer user here (%s)", nobody.uid, strings.Join([]string{p2.name, p1.name}, ", "))) {
		t.Errorf("nobody, a member that is no peer user: exit %d, %s; want forbidden", code, errOut)
	}
	// Root runs anything as anyone, a peer's user too.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "ras.yaml", "name: ras\ncommand: [\"@PROG@\", signals]\nuser: "+p1.name+"\n"))
	if w := d.waitState(t, "ras", api.StateRunning); procUID(t, w.PID) != p1.uid {
		t.Errorf("root's ras as %s runs as uid %d", p1.name, procUID(t, w.PID))
	}
	if w := d.get(t, "rnob2"); w.Restarts != 0 || w.State != api.StateRunning {
		t.Errorf("root's rnob2 after the attack: %s, %d restarts", w.State, w.Restarts)
	}
}

// TestTrustPeerUsesRootSecrets (issue 49, High 2): a peer's workload that
// uses root's rsvc is given its address and its public configuration, but
// not its secret_configuration, until root opens rsvc to peers by a
// policy (the rule that opens its endpoints to a peer's uses). Root's own
// consumer is given everything.
func TestTrustPeerUsesRootSecrets(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rsvc.yaml", `name: rsvc
command: ["@PROG@", signals]
identity: {module: store, service: rsvc}
endpoints: [{name: tcp, api: tcp, port: ephemeral}]
configuration: {conn: {url: "pg://rsvc"}}
secret_configuration: {conn: {password: "s3cr3t-of-root"}}
`))
	d.waitState(t, "rsvc", api.StateRunning)
	const (
		pass = "CODEFLY__SERVICE_SECRET_CONFIGURATION__STORE__RSVC__CONN__PASSWORD"
		url  = "CODEFLY__SERVICE_CONFIGURATION__STORE__RSVC__CONN__URL=pg://rsvc"
	)
	consumer := "command: [\"@PROG@\", env]\nuses: [rsvc]\n"
	// The attack: the peer's consumer prints its environment.
	if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "pcons.yaml", "name: pcons\n"+consumer)); code != 0 {
		t.Fatalf("the peer's apply: exit %d, %s", code, errOut)
	}
	text := d.waitLog(t, "pcons", url)
	if strings.Contains(text, pass) || strings.Contains(text, "s3cr3t-of-root") {
		t.Errorf("a peer's consumer of root's rsvc was given its secret configuration:\n%s", text)
	}
	if !strings.Contains(text, "CODEFLY__ENDPOINT__STORE__RSVC__TCP__TCP=") {
		t.Errorf("a peer's consumer of root's rsvc was not given its endpoint:\n%s", text)
	}
	// Root's own consumer is given the secret.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rcons.yaml", "name: rcons\n"+consumer))
	d.waitLog(t, "rcons", pass+"=s3cr3t-of-root")

	// Root opens rsvc to peers: the peer's next run is given it.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "open.yaml", "kind: policy\nname: rsvc-peers\nselect: {workloads: [rsvc]}\ningress: [{from: {users: true, peers: true}}]\n"))
	if _, errOut, code := d.as(t, p1, gid, "restart", "pcons"); code != 0 {
		t.Fatalf("the peer's restart: exit %d, %s", code, errOut)
	}
	d.waitLog(t, "pcons", pass+"=s3cr3t-of-root")
}

// TestTrustPeerClaimsRootNames (issue 49, High 4): a peer that takes a
// name first never becomes what root's name resolves to. Root's workload
// is refused a network a peer made (ci-shared, where the peer listens on
// 5432), and a project's network a peer made first (ci-8.net), naming
// the owner, rather than joining it or failing port_in_use; the peer is
// refused the replica names of root's group, and root's group the names a
// peer took before it, naming the owner; a `uses` of root's never
// resolves to the peer's workload that took a removed producer's name.
func TestTrustPeerClaimsRootNames(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	mustPeer := func(args ...string) { t.Helper(); d.mustAs(t, p1, gid, args...) }
	root := func(args ...string) (string, string, int) { return runCLI(t, d.socket, args...) }
	refused := func(what, want string, args ...string) { t.Helper(); wantRefused(t, what, want, root, args...) }
	owner := fmt.Sprintf("of uid %d", p1.uid)

	// A network: the peer's listener in ci-shared.
	mustPeer("apply", "-f", d.writeSpec(t, "lurk.yaml", "name: lurk\ncommand: [\"@PROG@\", signals]\nnetwork: ci-shared\nendpoints: [{name: pg, port: 5432}]\n"))
	refused("root's rapp in the peer's network", "network ci-shared holds workload lurk "+owner,
		"apply", "-f", d.writeSpec(t, "rapp.yaml", "name: rapp\ncommand: [\"@PROG@\", signals]\nnetwork: ci-shared\nenv: {PGPASSWORD: root-pass}\n"))
	// A project's network, taken before root's up.
	mustPeer("apply", "-p", "ci-8", "-f", d.writeSpec(t, "squat.yaml", "name: squat\ncommand: [\"@PROG@\", signals]\nnetwork: net\nendpoints: [{name: pg, port: 5432}]\n"))
	stack := filepath.Join(d.dir, "stack")
	if err := os.MkdirAll(stack, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stack, "pg.yaml"), []byte("name: pg\ncommand: [\""+d.prog+"\", signals]\nnetwork: net\nendpoints: [{name: pg, port: 5432}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("root's up -p ci-8", "project ci-8 holds workload squat "+owner, "up", "-p", "ci-8", "-f", stack)
	if _, err := d.client.Get(t.Context(), "ci-8.pg"); err == nil {
		t.Errorf("root's ci-8.pg was applied into the peer's network")
	}
	// Root opens a network to peers by its document: then it joins it.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "open.yaml", "kind: network\nname: ci-shared\npeers: true\n"))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rapp.yaml", "name: rapp\ncommand: [\"@PROG@\", signals]\nnetwork: ci-shared\n"))

	// Replica names: root's group rg, and a name the peer takes first.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rg.yaml", "name: rg\ncommand: [\"@PROG@\", signals]\nreplicas: 2\n"))
	if _, errOut, code := d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, "rg3.yaml", "name: rg-3\ncommand: [\"@PROG@\", signals]\n")); code != 1 || !strings.Contains(errOut, "rg-3 is a replica name of rg, a workload of uid 0") {
		t.Errorf("the peer's rg-3: exit %d, %s; want forbidden", code, errOut)
	}
	d.mustCLI(t, "scale", "rg", "3")
	if w := d.get(t, "rg-3"); w.AppliedBy != 0 {
		t.Errorf("rg-3 after root's scale: applied by %d", w.AppliedBy)
	}
	mustPeer("apply", "-f", d.writeSpec(t, "qg2.yaml", "name: qg-2\ncommand: [\"@PROG@\", signals]\n"))
	refused("root's group over the peer's qg-2", "replica qg-2 of qg: qg-2 is a workload of uid "+strconv.Itoa(int(p1.uid)),
		"apply", "-f", d.writeSpec(t, "qg.yaml", "name: qg\ncommand: [\"@PROG@\", signals]\nreplicas: 2\n"))
	if _, err := d.client.Get(t.Context(), "qg-1"); err == nil {
		t.Errorf("a refused group left qg-1")
	}

	// A uses: root's app3 uses pg3; root removes pg3; the peer's pg3, of
	// the same identity, is never what app3 gets.
	pg3 := "name: pg3\ncommand: [\"@PROG@\", signals]\nidentity: {module: store, service: pg3}\nendpoints: [{name: tcp, api: tcp, port: ephemeral}]\n"
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "pg3.yaml", pg3))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "app3.yaml", "name: app3\ncommand: [\"@PROG@\", env]\nuses: [pg3]\n"))
	d.waitLog(t, "app3", "CODEFLY__ENDPOINT__STORE__PG3__TCP__TCP=")
	d.mustCLI(t, "rm", "pg3")
	mustPeer("apply", "-f", d.writeSpec(t, "ppg3.yaml", pg3))
	want := fmt.Sprintf("uses[0]: pg3 is a workload of uid %d: root's documents name root's workloads alone", p1.uid)
	refused("root's restart of app3", want, "restart", "app3")
	if w := d.get(t, "app3"); w.State != api.StateFailed || !strings.Contains(w.LastError, want) {
		t.Errorf("app3 after the peer took pg3: %s, %q; want failed, naming the owner", w.State, w.LastError)
	}
	refused("root's new consumer of the peer's pg3", want,
		"apply", "-f", d.writeSpec(t, "app4.yaml", "name: app4\ncommand: [\"@PROG@\", env]\nuses: [pg3]\n"))
}

// TestTrustPathSearchedAsUser (issue 49, Low): a peer's workload whose PATH
// leads into a directory of root's that it may not search is told its
// program is not found, exactly as for a program that is nowhere: what
// root's directories hold is not told by "permission denied".
func TestTrustPathSearchedAsUser(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, _, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name))
	hidden := filepath.Join(d.dir, "rootbin")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "secret-tool"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	errs := map[string]string{}
	for _, prog := range []string{"secret-tool", "no-such-tool"} {
		name := strings.TrimSuffix(prog, "-tool")
		spec := fmt.Sprintf("name: %s\ncommand: [%s]\nenv: {PATH: %q}\nrestart: {policy: never}\n", name, prog, hidden)
		_, _, _ = d.as(t, p1, gid, "apply", "-f", d.writeSpec(t, name+".yaml", spec))
		w := d.waitState(t, name, api.StateFailed)
		errs[prog] = strings.ReplaceAll(w.LastError, prog, "PROG")
	}
	if errs["secret-tool"] != errs["no-such-tool"] || !strings.Contains(errs["secret-tool"], "not found in the workload's PATH") {
		t.Errorf("a program in root's closed directory: %q; a program nowhere: %q; want the same, not found", errs["secret-tool"], errs["no-such-tool"])
	}
	// Root's workload of the same spec finds it.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "rsecret.yaml", fmt.Sprintf("name: rsecret\ncommand: [secret-tool]\nenv: {PATH: %q}\nrestart: {policy: never}\n", hidden)))
	if w := d.waitState(t, "rsecret", api.StateExited); w.LastExit == nil || w.LastExit.Code != 0 {
		t.Errorf("root's run of secret-tool: %+v", w.LastExit)
	}
}

// TestTrustAProjectIsOneOwners: a project holding a peer's workload is
// that peer's. Root's up and run of it are refused, naming the workload,
// with nothing made and the peer's workload untouched (an up would remove
// what its files do not name, and a run ends by taking the project
// down: its hold is refused before anything); another peer's up and down are refused
// without being told what it holds; its owner's down, or root's, takes it
// down.
func TestTrustAProjectIsOneOwners(t *testing.T) {
	t.Parallel()
	gid := usersGroup(t)
	p1, p2, _ := peerUsers(t)
	d := startDaemon(t, withArgs("--socket-group", "users", "--peer-users", p1.name+","+p2.name))
	mine := d.writeSpec(t, "pp-mine.yaml", "name: pw\ncommand: [\"@PROG@\", signals]\n")
	theirs := d.writeSpec(t, "pp-theirs.yaml", "name: rw\ncommand: [\"@PROG@\", signals]\n")

	d.mustAs(t, p1, gid, "up", "-p", "pp", "-f", mine, "--wait")
	pid := d.waitState(t, "pp.pw", api.StateRunning).PID
	wantRefused(t, "root's up of a peer's project", "project pp holds workload pw of uid "+strconv.Itoa(int(p1.uid)),
		func(args ...string) (string, string, int) { return runCLI(t, d.socket, args...) }, "up", "-p", "pp", "-f", theirs)
	wantRefused(t, "root's run in a peer's project", "a project is one owner's",
		func(args ...string) (string, string, int) { return runCLI(t, d.socket, args...) }, "run", "-p", "pp", "-f", theirs, "--", "true")
	asP2 := func(args ...string) (string, string, int) { return d.as(t, p2, gid, args...) }
	wantRefused(t, "another peer's up", "project pp holds workloads of another user", asP2, "up", "-p", "pp", "-f", mine)
	wantRefused(t, "another peer's down", "project pp holds workloads of another user", asP2, "down", "-p", "pp")
	if _, err := d.client.Get(t.Context(), "pp.rw"); err == nil {
		t.Errorf("a refused up left pp.rw")
	}
	if w := d.get(t, "pp.pw"); w.PID != pid || w.State != api.StateRunning {
		t.Errorf("the peer's pp.pw after the refusals: %s, pid %d (was %d)", w.State, w.PID, pid)
	}
	d.mustCLI(t, "down", "-p", "pp")
	if _, err := d.client.Get(t.Context(), "pp.pw"); err == nil {
		t.Errorf("root's down left pp.pw")
	}
}
