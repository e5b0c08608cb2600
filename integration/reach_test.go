package integration

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/instance"
)

// reachStack is pg, serving at port, a consumer (app, which uses it) and a
// sidecar that declares nothing, both dialling it every 100 ms, in network
// (the host's when it is "").
func reachStack(port int, network, pgAddr string) string {
	net := ""
	if network != "" {
		net = "network: " + network + "\n"
	}
	return fmt.Sprintf(`
name: pg
command: ["@PROG@", "serve", "%[3]s:${PORT_SQL}"]
endpoints: [{name: sql, api: tcp, port: %[1]d}]
health: {tcp: sql, interval: 200ms, timeout: 1s, failures: 1}
%[2]s---
name: app
command: ["@PROG@", "dial", "127.0.0.1:%[1]d", "100ms"]
uses: [pg]
%[2]s---
name: side
command: ["@PROG@", "dial", "127.0.0.1:%[1]d", "100ms"]
%[2]s`, port, net, pgAddr)
}

var refusedAfter = regexp.MustCompile(`dial refused after (\d+)us`)

// requireRefusedAtOnce waits for name's log to say it was refused, and
// fails unless the refusal came at once: a reset, never a drop that
// leaves the client waiting out its timeout.
func (d *daemon) requireRefusedAtOnce(t *testing.T, name string) {
	t.Helper()
	m := refusedAfter.FindStringSubmatch(d.waitLog(t, name, "dial refused"))
	if m == nil {
		t.Fatalf("%s was not refused: %s", name, d.logs(t, name))
	}
	// A dropped SYN is sent again after a second: anything well under
	// that was answered (stretched under emulation, FLYD_TEST_TIME_SCALE).
	if us, _ := strconv.Atoi(m[1]); us > 100_000*timeScale() {
		t.Errorf("%s was refused after %d µs, want at once", name, us)
	}
}

// reachChecks are what both reach tests check of the stack: app reaches
// pg, side is refused at once and named by an event, by flyd reach and
// by the metric, pg's health check passes, a uses added at run time
// admits and a uses removed refuses, without pg restarting.
func reachChecks(t *testing.T, d *daemon, events *stream, port int) {
	t.Helper()
	d.waitWorkload(t, "pg", "healthy: the daemon's health check reaches it", func(w *api.Workload) bool { return w.Healthy != nil && *w.Healthy })
	d.waitLog(t, "app", "dial ok")
	d.requireRefusedAtOnce(t, "side")
	want := fmt.Sprintf("undeclared dependency: side → pg/sql (%d)", port)
	events.waitLine(t, "the event naming side", func(l string) bool { return strings.Contains(l, want) })
	eventually(t, "flyd reach pg naming its allow-list and side's refusals", func() error {
		o := d.mustCLI(t, "reach", "pg")
		for _, w := range []string{"admits pg: itself", "admits app: uses: [pg]", "admits " + api.ReachFlyd, "refused side:"} {
			if !strings.Contains(o, w) {
				return fmt.Errorf("flyd reach pg lacks %q:\n%s", w, o)
			}
		}
		return nil
	})
	if m := d.metrics(t); !strings.Contains(m, `flyd_reach_refused_total{from="side",to="pg/sql"}`) {
		t.Errorf("/metrics has no refusal of side's:\n%s", m)
	}

	// A uses added at run time admits, removed refuses; pg runs on.
	pg := d.get(t, "pg").PID
	d.applyReach(t, "side", port, "uses: [pg]\n")
	d.waitLog(t, "side", "dial ok")
	// Its refusals were before: flyd reach no longer tells it to add pg.
	if o := d.mustCLI(t, "reach", "pg"); !regexp.MustCompile(`refused side: \d+ times \(before it was admitted: uses: \[pg\]\)`).MatchString(o) {
		t.Errorf("flyd reach pg, side admitted now:\n%s", o)
	}
	d.applyReach(t, "app", port, "")
	eventually(t, "app refused once its uses is gone", func() error {
		l := d.logs(t, "app")
		if i, j := strings.LastIndex(l, "dial ok"), strings.LastIndex(l, "dial refused"); j < i {
			return fmt.Errorf("app's log: %s", l)
		}
		return nil
	})
	if now := d.get(t, "pg").PID; now != pg {
		t.Errorf("pg restarted (pid %d, then %d)", pg, now)
	}
}

// applyReach applies a dialling workload of the stack again with more.
func (d *daemon) applyReach(t *testing.T, name string, port int, more string) {
	t.Helper()
	w := d.get(t, name)
	net := ""
	if w.Spec.Network != "" && w.Spec.Network != "host" {
		net = "network: " + w.Spec.Network + "\n"
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, name+"-again.yaml",
		fmt.Sprintf("name: %s\ncommand: [\"@PROG@\", \"dial\", \"127.0.0.1:%d\", \"100ms\"]\n%s%s", name, port, net, more)))
	d.waitState(t, name, api.StateRunning)
}

// TestReachDeclaredInNetwork: in one isolated network under declared
// reach, app (uses: [pg]) reaches pg and a sidecar that declares nothing
// is refused at once, named by an event; pg's health check and flyd exec
// reach it; a uses added at run time admits without a restart, one
// removed refuses; a daemon killed with SIGKILL changes no rule while it is
// down, and the restarted daemon keeps them.
func TestReachDeclaredInNetwork(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	d := startDaemon(t)
	port := freePort(t)
	events := startStream(t, d.socket, "events")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stack.yaml", "kind: network\nname: ci-reach\nreach: declared\n---"+reachStack(port, "ci-reach", "127.0.0.1")))
	reachChecks(t, d, events, port)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if o, e, code := runCLI(t, d.socket, "exec", "--network", "ci-reach", "--", d.prog, "get", addr); code != 0 || !strings.Contains(o, "hello from testprog") {
		t.Errorf("flyd exec did not reach pg: %d %s %s", code, o, e)
	}

	// Killed: nothing changes while no daemon runs, nor when the next one
	// starts. side (a user now) still reaches pg, app is still refused.
	ns := ""
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	for _, n := range nets {
		if n.Name == "ci-reach" {
			ns = n.Path
		}
	}
	before := reachTable(t, ns, "flyd-reach")
	if !strings.Contains(before, "refused-local") {
		t.Fatalf("no reach table in ci-reach:\n%s", before)
	}
	d.kill(t)
	time.Sleep(300 * time.Millisecond)
	if now := reachTable(t, ns, "flyd-reach"); now != before {
		t.Errorf("the reach table changed while no daemon ran:\n%s\nwas:\n%s", now, before)
	}
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "pg", api.StateRunning)
	time.Sleep(time.Second) // a rewrite would have happened by now
	if now := reachTable(t, ns, "flyd-reach"); now != before {
		t.Errorf("the restarted daemon changed the reach table:\n%s\nwas:\n%s", now, before)
	}
	if o, e, code := runCLI(t, d.socket, "exec", "--network", "ci-reach", "--", d.prog, "get", addr); code != 0 || !strings.Contains(o, "hello from testprog") {
		t.Errorf("after a restart, flyd exec did not reach pg: %d %s %s", code, o, e)
	}
}

// TestReachDeclaredOnHost: the same on the host's network (--reach-host
// declared), where a process that is no workload (this test) still
// reaches pg; and from an isolated network, a workload that uses pg
// reaches it at its gateway while one that does not is refused, there
// and at another address of the host's.
func TestReachDeclaredOnHost(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	d := startDaemon(t, withArgs("--reach-host", "declared"))
	port := freePort(t)
	events := startStream(t, d.socket, "events")
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stack.yaml", reachStack(port, "", "0.0.0.0")+`---
name: far
command: ["@PROG@", "signals"]
network: ci-far
---
name: near
command: ["@PROG@", "signals"]
network: ci-near
`))
	d.waitState(t, "far", api.StateRunning)
	d.waitState(t, "near", api.StateRunning)
	gws := d.gateways(t)
	// far-sneak dials another address of the host's (near's gateway),
	// where far's own table does not look: the host refuses it.
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "far.yaml", fmt.Sprintf(`
name: far-user
command: ["@PROG@", "dial", "%[1]s:%[3]d", "100ms"]
uses: [pg]
network: ci-far
---
name: far-side
command: ["@PROG@", "dial", "%[1]s:%[3]d", "100ms"]
network: ci-far
---
name: far-sneak
command: ["@PROG@", "dial", "%[2]s:%[3]d", "100ms"]
network: ci-far
`, gws["ci-far"], gws["ci-near"], port)))
	reachChecks(t, d, events, port)
	if o, _, code := runCmd(t, exec.Command(d.prog, "get", "127.0.0.1:"+strconv.Itoa(port))); code != 0 || !strings.Contains(o, "hello from testprog") {
		t.Errorf("a process that is no workload was refused pg: %s", o)
	}
	d.waitLog(t, "far-user", "dial ok")
	d.requireRefusedAtOnce(t, "far-side")
	d.requireRefusedAtOnce(t, "far-sneak")
	table := instance.Name(d.runDir) + "-reach"
	if s := reachTable(t, "", table); !strings.Contains(s, "remote") {
		t.Errorf("no reach table on the host:\n%s", s)
	}
}

// reachTable reads a reach table's rules (with their handles: a table
// written again has others) and the keys of its sets' elements, in
// namespace ns ("" the host's).
func reachTable(t *testing.T, ns, name string) string {
	t.Helper()
	var opts []nftables.ConnOption
	if ns != "" {
		fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	tbl := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
	var b strings.Builder
	for _, ch := range []string{"reach", "reach-check"} {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: ch, Table: tbl})
		if err != nil {
			return fmt.Sprintf("no table %s (%v)", name, err)
		}
		for _, r := range rules {
			fmt.Fprintf(&b, "%s rule %d\n", ch, r.Handle)
		}
	}
	sets, err := c.GetSets(tbl)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(sets, func(a, b *nftables.Set) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range sets {
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range elems {
			// A refused set's counts go on while app is refused: its
			// keys are what a rewrite would lose.
			keys = append(keys, fmt.Sprintf("%x", e.Key))
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "%s %v\n", s.Name, keys)
	}
	return b.String()
}

// TestReachContainerd: a container is told apart like a native workload
// (runc puts it in the v2 tree at its cgroup's path, on a hybrid host
// too): refused while it declares nothing, admitted once it uses pg.
func TestReachContainerd(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	port := freePort(t)
	box := func(uses string) string {
		return fmt.Sprintf(`
name: box
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %s}
command: ["sh", "-c", "while :; do if nc -w 2 127.0.0.1 %d </dev/null; then echo dial ok; else echo dial refused; fi; sleep 0.2; done"]
network: ci-cbox
%s`, archive, port, uses)
	}
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "stack.yaml", fmt.Sprintf(`
kind: network
name: ci-cbox
reach: declared
---
name: pg
command: ["@PROG@", "serve", "127.0.0.1:${PORT_SQL}"]
endpoints: [{name: sql, api: tcp, port: %d}]
network: ci-cbox
---`, port)+box("")))
	d.waitState(t, "box", api.StateRunning)
	d.waitLog(t, "box", "dial refused")
	eventually(t, "box named by flyd reach", func() error {
		if o := d.mustCLI(t, "reach", "pg"); !strings.Contains(o, "refused box:") {
			return fmt.Errorf("flyd reach pg:\n%s", o)
		}
		return nil
	})
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "box.yaml", box("uses: [pg]\n")))
	d.waitLog(t, "box", "dial ok")
}
