package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestSharedFlagsBeforeTheCommand: `flyd --socket S ps` talks to S, even
// with FLYD_SOCKET pointing elsewhere, and `flyd --json ps` prints JSON.
func TestSharedFlagsBeforeTheCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "a.yaml", "name: lead\ncommand: [\"@PROG@\", signals]\n"))
	nowhere := filepath.Join(t.TempDir(), "none.sock")
	out, errOut, code := runCLI(t, nowhere, "--socket", d.socket, "ps")
	if code != 0 || !strings.Contains(out, "lead") {
		t.Fatalf("flyd --socket S ps: exit %d, %q %q; want the table of S's daemon", code, out, errOut)
	}
	out, errOut, code = runCLI(t, nowhere, "--socket="+d.socket, "--json", "ps")
	if code != 0 || !strings.HasPrefix(out, "[") || !strings.Contains(out, `"name": "lead"`) {
		t.Fatalf("flyd --socket=S --json ps: exit %d, %q %q; want JSON", code, out, errOut)
	}
	d.mustCLI(t, "stop", "lead")
}

// TestRemovalsSaySo: `policies rm` and `networks rm` say what went.
func TestRemovalsSaySo(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "docs.yaml", `
kind: policy
name: gone
select: {networks: [ci-kept]}
ingress: []
---
name: kept
network: ci-kept
command: ["@PROG@", signals]
`))
	d.waitState(t, "kept", api.StateRunning)
	// A network nobody uses, as a daemon killed in its sweep leaves one:
	// bound beside the daemon's own, which only `networks rm` deletes.
	gone := filepath.Join(d.runDir, "netns", "ci-gone")
	if err := os.WriteFile(gone, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+gone, "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare --net=%s: %v: %s", gone, err, out)
	}
	if out := d.mustCLI(t, "policies", "rm", "gone"); out != "policy gone removed\n" {
		t.Errorf("policies rm printed %q, want \"policy gone removed\"", out)
	}
	if out := d.mustCLI(t, "networks", "rm", "ci-gone"); out != "network ci-gone removed\n" {
		t.Errorf("networks rm printed %q, want \"network ci-gone removed\"", out)
	}
	if out := d.mustCLI(t, "policies"); strings.Contains(out, "gone") {
		t.Errorf("the policy is still listed:\n%s", out)
	}
	// What is not there is said as before: an error, exit 1.
	if _, errOut, code := runCLI(t, d.socket, "policies", "rm", "gone"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("removing it again: exit %d, %q", code, errOut)
	}
	d.mustCLI(t, "rm", "kept")
}

// publishedSpec is three workloads of one network, each with two
// endpoints published on the host: a networks row of many.
func publishedSpec(t *testing.T, d *daemon) (spec string, hostPorts [3][2]int) {
	t.Helper()
	for i := range 3 {
		for j := range 2 {
			hostPorts[i][j] = freePort(t)
		}
		spec += fmt.Sprintf(`---
name: pub-%d
network: ci-pub
command: ["@PROG@", signals]
endpoints:
  - {name: http, api: http, port: %d, publish: %d}
  - {name: admin, port: %d, publish: %d}
`, i, 8000+i, hostPorts[i][0], 9000+i, hostPorts[i][1])
	}
	return d.writeSpec(t, "pub.yaml", spec), hostPorts
}

// TestPsPortNotation: `flyd ps` writes a published endpoint as
// ENDPOINT:HOSTPORT->PORT, an unpublished one as ENDPOINT:PORT, and the
// network after them, as `flyd top` does.
func TestPsPortNotation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file, hp := publishedSpec(t, d)
	d.mustCLI(t, "apply", "-f", file, "-f", d.writeSpec(t, "plain.yaml", `
name: plain
command: ["@PROG@", signals]
endpoints: [{name: tcp, port: ephemeral}]
`))
	out := d.mustCLI(t, "ps")
	want := fmt.Sprintf("http:%d->8000,admin:%d->9000 @ci-pub", hp[0][0], hp[0][1])
	if !strings.Contains(out, want) {
		t.Errorf("ps does not show %q:\n%s", want, out)
	}
	plain := d.get(t, "plain")
	if want := fmt.Sprintf("tcp:%d ", plain.Ports[0].Port); !strings.Contains(out, want) {
		t.Errorf("ps does not show %q:\n%s", want, out)
	}
	d.mustCLI(t, "rm", "pub-0", "pub-1", "pub-2", "plain")
}

// TestEventsResumeBeforeAnyEvent: `flyd events` that saw no event before
// the daemon went away still resumes from where the daemon was, so the
// next daemon's adoption of the running workload is shown.
func TestEventsResumeBeforeAnyEvent(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "a.yaml", "name: kept\ncommand: [\"@PROG@\", signals]\n"))
	d.waitState(t, "kept", api.StateRunning)
	events := startStream(t, d.socket, "events", "--json")
	d.waitStreams(t, 1)
	d.kill(t)
	d2 := startDaemon(t, inDir(d.dir))
	line := events.waitLine(t, "the adoption by the next daemon", func(l string) bool {
		return strings.Contains(l, `"workload":"kept"`) && strings.Contains(l, `"message":"adopted"`)
	})
	var ev api.Event
	decodeJSON(t, line, &ev)
	if ev.State != api.StateRunning {
		t.Errorf("the adoption event says %q, want running", ev.State)
	}
	// Nothing from before the stream opened was replayed.
	for _, l := range events.lines() {
		if strings.Contains(l, `"message":"created"`) {
			t.Errorf("an event from before the stream was printed: %s", l)
		}
	}
	d2.mustCLI(t, "stop", "kept")
}

// TestApplyWaitSaysWhatIsUp: `apply --wait` ends by saying what each
// workload is; when one is not up it shows the end of its log on stderr.
func TestApplyWaitSaysWhatIsUp(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	out := d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "up.yaml", `
name: svc
command: ["@PROG@", signals]
---
name: job
command: ["@PROG@", "exit", "0"]
restart: {policy: never}
`))
	svc := d.get(t, "svc")
	for _, want := range []string{fmt.Sprintf("svc up: running, pid %d\n", svc.PID), "job up: exited 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply --wait printed %q, want a line %q", out, want)
		}
	}

	out, errOut, code := runCLI(t, d.socket, "apply", "--wait", "-f", d.writeSpec(t, "down.yaml", `
name: broken
command: ["sh", "-c", "for i in $(seq 1 30); do echo line $i; done; exit 3"]
restart: {policy: never}
---
name: fine
command: ["@PROG@", signals]
`))
	if code != 1 || !strings.Contains(errOut, "not up: broken (exited") {
		t.Fatalf("apply --wait of a broken workload: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "broken: the last lines of its log:\n") || !strings.Contains(errOut, "line 21\n") || !strings.Contains(errOut, "line 30\n") || strings.Contains(errOut, "line 20\n") {
		t.Errorf("stderr does not end with broken's last 10 lines:\n%s", errOut)
	}
	if strings.Contains(errOut, "fine:") {
		t.Errorf("the log of a workload that is up was shown:\n%s", errOut)
	}
	d.mustCLI(t, "stop", "svc", "fine")
}

// TestTopShowsWhatWasBefore: `flyd top` opens with the recent events in
// its events pane, writes endpoints as `flyd ps` does, and at 120 columns
// its networks view shows a network's workloads however many ports it
// publishes.
func TestTopShowsWhatWasBefore(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file, hp := publishedSpec(t, d)
	d.mustCLI(t, "apply", "--wait", "-f", file)
	s := startTop(t, d, 120, 40)
	running := regexp.MustCompile(`pub-\d state running`)
	s.waitScreen("the events from before top opened", func(sc string) bool { return running.MatchString(sc) })
	notation := fmt.Sprintf("http:%d->8000,admin:%d->9000 @ci-pub", hp[0][0], hp[0][1])
	if ps := d.mustCLI(t, "ps"); !strings.Contains(ps, notation) {
		t.Fatalf("ps does not write %q:\n%s", notation, ps)
	}
	s.waitScreen("pub-0's endpoints as ps writes them", func(sc string) bool { return strings.Contains(sc, notation) })
	s.keys("n")
	s.waitScreen("the networks view with ci-pub's workloads", func(sc string) bool {
		return strings.Contains(sc, "WORKLOADS") && strings.Contains(sc, "pub-0,pub-1,pub-2")
	})
	s.keys("q")
	s.waitScreen("top gone", func(sc string) bool { return strings.Contains(sc, "TOP-EXITED 0") })
	d.mustCLI(t, "rm", "pub-0", "pub-1", "pub-2")
}
