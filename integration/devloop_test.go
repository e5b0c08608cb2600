package integration

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// The developer's loop: where a workload starts, and one applied to be
// started when asked.

// TestWorkdirIsTheFilesDirectory: a spec file's workload starts in the
// file's directory, a relative workdir is the file's; over the API a
// workload without one starts in /.
func TestWorkdirIsTheFilesDirectory(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	stack := filepath.Join(d.dir, "stack")
	if err := os.MkdirAll(filepath.Join(stack, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(stack, "wd.yaml")
	if err := os.WriteFile(file, []byte(`name: here
command: [sh, -c, "echo in $(pwd); exec sleep 600"]
---
name: below
workdir: sub
command: [sh, -c, "echo in $(pwd); exec sleep 600"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// From another directory, by a relative path: the file's directory
	// all the same.
	cmd := cliCmd(context.Background(), d.socket, "apply", "-f", "stack/wd.yaml")
	cmd.Dir = d.dir
	if out, errOut, code := runCmd(t, cmd); code != 0 {
		t.Fatalf("apply: exit %d: %s %s", code, out, errOut)
	}
	d.waitLog(t, "here", "in "+stack+"\n")
	d.waitLog(t, "below", "in "+filepath.Join(stack, "sub")+"\n")
	if w := d.get(t, "below"); w.Spec.Workdir != filepath.Join(stack, "sub") {
		t.Errorf("the spec says workdir %q", w.Spec.Workdir)
	}
	api1 := &spec.Workload{Name: "bare", Command: []string{"sh", "-c", "echo in $(pwd); exec sleep 600"}}
	if _, err := d.client.Apply(context.Background(), api1, api.ApplyOptions{Start: true}); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "bare", "in /\n")
}

// TestDisabled: a disabled workload is applied and listed, not started by
// apply or up (whose wait counts it as up), nor by a daemon's restart;
// flyd start starts it, and an apply again leaves it running.
func TestDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "dis.yaml", `name: on
command: ["@PROG@", signals]
---
name: off
disabled: true
command: ["@PROG@", signals]
`)
	out := d.mustCLI(t, "up", "-p", "dv", "-f", file, "--wait")
	if !strings.Contains(out, "dv.off up: disabled") {
		t.Errorf("up --wait said %q", out)
	}
	if w := d.get(t, "dv.off"); w.State != api.StateStopped || w.PID != 0 {
		t.Fatalf("dv.off is %s, pid %d; want stopped", w.State, w.PID)
	}
	if ps := d.mustCLI(t, "ps", "-p", "dv"); !strings.Contains(ps, "dv.off") {
		t.Errorf("ps does not list dv.off: %s", ps)
	}
	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "dv.on", api.StateRunning)
	if w := d.get(t, "dv.off"); w.State != api.StateStopped {
		t.Fatalf("a daemon's start started dv.off: %s", w.State)
	}
	d.mustCLI(t, "-p", "dv", "start", "off")
	d.waitState(t, "dv.off", api.StateRunning)
	pid := d.get(t, "dv.off").PID
	d.mustCLI(t, "up", "-p", "dv", "-f", file)
	if w := d.get(t, "dv.off"); w.State != api.StateRunning || w.PID != pid {
		t.Errorf("an up again changed the started dv.off: %s, pid %d (was %d)", w.State, w.PID, pid)
	}
	d.mustCLI(t, "down", "-p", "dv")
}

// TestUpAttach: an attached up follows the project's logs, each line
// behind its workload's name, says its own on stderr, and on SIGINT takes
// the project down and exits 0.
func TestUpAttach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "att.yaml", `name: a
command: [sh, -c, "echo hello from a; exec sleep 600"]
---
name: b
command: [sh, -c, "echo hello from b; exec sleep 600"]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := cliCmd(ctx, d.socket, "up", "-p", "at", "-f", file, "--attach")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	seen := map[string]bool{}
	sc := bufio.NewScanner(out)
	for len(seen) < 2 && sc.Scan() {
		for _, w := range []string{"a", "b"} {
			if line := sc.Text(); strings.Contains(line, "at."+w) && strings.HasSuffix(line, "hello from "+w) {
				seen[w] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Fatalf("the attached up printed the lines of %v alone (stderr %s)", seen, errOut.String())
	}
	if ls, err := d.client.Leases(ctx); err != nil || len(ls) != 1 || !ls[0].Held {
		t.Errorf("the attached project is not held: %+v, %v", ls, err)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_, _ = io.Copy(io.Discard, out) // to its end: the command exited
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("up --attach after SIGINT exited %d; want 0 (stderr %s)", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "project at taken down") {
		t.Errorf("stderr: %q", errOut.String())
	}
	assertNoProjects(t, d, "at")
}

// TestWatchInclude: a watch entry with include globs restarts its
// workload for a change they match alone, after its own debounce.
func TestWatchInclude(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	src := filepath.Join(d.dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	file := d.writeSpec(t, "inc.yaml", `name: w
command: ["@PROG@", signals]
watch:
  - {path: src, include: ["*.go"], debounce: 50ms}
`)
	d.mustCLI(t, "up", "-p", "wi", "-f", file, "--watch", "--wait")
	pid := d.get(t, "wi.w").PID
	for _, f := range []string{"README.md", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	if w := d.get(t, "wi.w"); w.PID != pid {
		t.Fatalf("a change no include glob matches restarted the workload (pid %d, was %d)", w.PID, pid)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitWorkload(t, "wi.w", "restarted by main.go", func(w *api.Workload) bool { return w.PID != pid && w.State == api.StateRunning })
	d.mustCLI(t, "down", "-p", "wi")
}
