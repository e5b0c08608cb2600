package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestCLIForms goes through the CLI's other ways of saying things: specs
// from stdin and from a directory, --start=false, --all, the tables.
func TestCLIForms(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	// Stdin.
	cmd := cliCmd(t.Context(), d.socket, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.ReplaceAll("name: from-stdin\ncommand: [\"@PROG@\", print, \"3\"]\n", "@PROG@", d.prog))
	if out, errOut, code := runCmd(t, cmd); code != 0 || !strings.Contains(out, "from-stdin running") {
		t.Fatalf("apply -f -: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// stdout and stderr together, in the order written.
	var want strings.Builder
	for _, n := range []string{"1", "2", "3"} {
		want.WriteString("stdout line " + n + "\nstderr line " + n + "\n")
	}
	if got := d.waitLog(t, "from-stdin", "stderr line 3\n"); got != want.String() {
		t.Errorf("log = %q, want %q", got, want.String())
	}

	// A directory: every spec file in it, other files ignored.
	dir := filepath.Join(d.dir, "specs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"a.yaml":    "name: dir-a\ncommand: [\"@PROG@\", print, \"1\"]\n",
		"b.json":    `{"name": "dir-b", "command": ["@PROG@", "print", "1"]}`,
		"notes.txt": "not a spec",
	} {
		d.writeSpec(t, filepath.Join("specs", name), text)
	}
	out := d.mustCLI(t, "apply", "--start=false", "-f", dir)
	if !strings.Contains(out, "dir-a stopped") || !strings.Contains(out, "dir-b stopped") {
		t.Errorf("apply --start=false -f DIR printed %q, want both workloads stopped", out)
	}

	d.mustCLI(t, "start", "dir-a", "dir-b")
	table := d.mustCLI(t, "ps")
	for _, want := range []string{"NAME", "STATE", "from-stdin", "dir-a", "dir-b", "running"} {
		if !strings.Contains(table, want) {
			t.Errorf("ps table lacks %q:\n%s", want, table)
		}
	}
	var st api.Status
	decodeJSON(t, d.mustCLI(t, "status", "--json"), &st)
	if st.Workloads != 3 || st.States[api.StateRunning] != 3 || !st.Runtimes["native"] || st.PID != d.pid() {
		t.Errorf("status: %+v, want 3 workloads running, the native runtime, pid %d", st, d.pid())
	}
	a := d.get(t, "dir-a")
	d.mustCLI(t, "restart", "dir-a")
	if a2 := d.get(t, "dir-a"); a2.PID == a.PID || a2.State != api.StateRunning {
		t.Errorf("restart: pid %d (was %d), state %s; want a new run", a2.PID, a.PID, a2.State)
	}
	if err := reaped(a.PID, d.pid()); err != nil {
		t.Error(err)
	}

	d.mustCLI(t, "stop", "--all")
	ws, err := d.client.List(t.Context())
	if err != nil || len(ws) != 3 {
		t.Fatalf("list: %+v %v", ws, err)
	}
	for _, w := range ws {
		if w.State != api.StateStopped || w.PID != 0 {
			t.Errorf("after stop --all: %s is %s (pid %d)", w.Name, w.State, w.PID)
		}
	}
	if left := processesUnder(d.dir); len(left) > 0 {
		t.Errorf("processes left after stop --all: %v", left)
	}

	if _, errOut, code := runCLI(t, d.socket, "logs", "nope"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("logs of an unknown workload: exit %d, stderr %q; want 1, not_found", code, errOut)
	}
	if _, errOut, code := runCLI(t, d.socket, "stop", "dir-a", "nope"); code != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("stop of a known and an unknown workload: exit %d, stderr %q; want 1 naming nope", code, errOut)
	}
	if out := d.mustCLI(t, "version"); !strings.HasPrefix(out, "flyd ") {
		t.Errorf("version printed %q", out)
	}

	d.mustCLI(t, "rm", "--all")
	if ws, err := d.client.List(t.Context()); err != nil || len(ws) != 0 {
		t.Errorf("after rm --all: %+v %v", ws, err)
	}
}

// TestLogsTailZero asks for no past lines: `--tail 0`, as with tail(1),
// docker, kubectl and journalctl, prints none, and with -f only what comes
// next.
func TestLogsTailZero(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "p.yaml", "name: p\ncommand: [\"@PROG@\", print, \"2\"]\n"))
	d.waitLog(t, "p", "stderr line 2\n")
	if out := d.mustCLI(t, "logs", "--tail", "0", "p"); out != "" {
		t.Errorf("logs --tail 0 printed %q, want nothing", out)
	}
}
