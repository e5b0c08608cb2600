package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
)

// TestStreamsDoNotLeak opens log and event streams, goes away in every way a
// client can, and checks the daemon lets go of each.
func TestStreamsDoNotLeak(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "chatty.yaml", "name: chatty\ncommand: [\"@PROG@\", print, \"3\"]\n"))
	d.waitLog(t, "chatty", "stderr line 3")

	t.Run("Go client, cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		logsDone := make(chan error, 1)
		go func() {
			logsDone <- d.client.Logs(ctx, "chatty", api.LogQuery{Tail: -1, Follow: true}, api.WriteLog(io.Discard))
		}()
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		ch, err := d.client.Events(ctx2, 0)
		if err != nil {
			t.Fatal(err)
		}
		d.waitStreams(t, 2)
		cancel()
		select {
		case err := <-logsDone:
			if err != nil {
				t.Errorf("Logs after cancel: %v, want nil", err)
			}
		case <-time.After(waitFor):
			t.Fatalf("Logs still runs %s after its context was cancelled", waitFor)
		}
		cancel2()
		eventually(t, "the events channel closed", func() error {
			select {
			case _, open := <-ch:
				if !open {
					return nil
				}
			default:
			}
			return errors.New("still open")
		})
		d.waitStreams(t, 0)
	})

	t.Run("CLI killed mid-stream", func(t *testing.T) {
		logs := startStream(t, d.socket, "logs", "-f", "chatty")
		events := startStream(t, d.socket, "events")
		logs.waitLine(t, "the log", func(l string) bool { return l == "stdout line 3" })
		d.waitStreams(t, 2)
		for _, s := range []*stream{logs, events} {
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.done
		}
		d.waitStreams(t, 0)
	})

	t.Run("CLI interrupted", func(t *testing.T) {
		logs := startStream(t, d.socket, "logs", "-f", "chatty")
		d.waitStreams(t, 1)
		_ = logs.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-logs.done:
		case <-time.After(waitFor):
			t.Fatalf("logs -f still runs %s after SIGINT", waitFor)
		}
		if code := logs.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("logs -f interrupted: exit %d, want 0", code)
		}
		d.waitStreams(t, 0)
	})

	t.Run("workload removed under a follower", func(t *testing.T) {
		logs := startStream(t, d.socket, "logs", "-f", "chatty")
		d.waitStreams(t, 1)
		d.mustCLI(t, "rm", "chatty")
		_ = logs.cmd.Process.Signal(syscall.SIGKILL)
		<-logs.done
		d.waitStreams(t, 0)
	})
}

// TestShutdownEndsStreams: a daemon that exits ends its streams, and the
// CLI commands reading them exit instead of hanging.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withArgs("--stop-workloads-on-exit"))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "p.yaml", "name: p\ncommand: [\"@PROG@\", print, \"1\"]\n"))
	logs := startStream(t, d.socket, "logs", "-f", "--reconnect", "1s", "p")
	events := startStream(t, d.socket, "events", "--reconnect", "1s")
	d.waitStreams(t, 2)
	d.terminate(t)
	for _, s := range []*stream{logs, events} {
		select {
		case <-s.done:
			if s.cmd.ProcessState.Success() {
				t.Errorf("%v exited 0 when the daemon went away", s.cmd.Args[1:])
			}
		case <-time.After(waitFor):
			t.Errorf("%v still runs %s after the daemon exited", s.cmd.Args[1:], waitFor)
		}
	}
	if left := processesUnder(d.dir); len(left) > 0 {
		t.Errorf("--stop-workloads-on-exit left %v running", left)
	}
}

// TestSignalAndEvents watches the event stream through a lifecycle and
// delivers signals through the API.
func TestSignalAndEvents(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	events := startStream(t, d.socket, "events", "--json")
	d.waitStreams(t, 1)

	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "sig.yaml", "name: sig\ncommand: [\"@PROG@\", signals]\n"))
	d.waitLog(t, "sig", "waiting for signals")
	ctx := context.Background()
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1} {
		if err := d.client.Signal(ctx, "sig", sig); err != nil {
			t.Fatalf("signal %v: %v", sig, err)
		}
	}
	d.waitLog(t, "sig", "got SIGHUP")
	d.waitLog(t, "sig", "got SIGUSR1")
	if w := d.get(t, "sig"); w.State != api.StateRunning || w.Restarts != 0 {
		t.Errorf("after signals: state %s restarts %d, want running, no restart", w.State, w.Restarts)
	}
	d.mustCLI(t, "stop", "sig")
	if err := d.client.Signal(ctx, "sig", syscall.SIGHUP); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("signal to a stopped workload: %v, want conflict", err)
	}
	if err := d.client.Signal(ctx, "nope", syscall.SIGHUP); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("signal to an unknown workload: %v, want not found", err)
	}

	// The stream saw the whole life, in order.
	events.waitLine(t, "the stopped event", func(l string) bool { return strings.Contains(l, `"state":"stopped"`) })
	var states []api.State
	var types []string
	for _, l := range events.lines() {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("events --json printed %q: %v", l, err)
		}
		if ev.Workload != "sig" {
			continue
		}
		types = append(types, ev.Type)
		if ev.Type == api.EventState {
			states = append(states, ev.State)
		}
	}
	if !inOrder(states, api.StateStarting, api.StateRunning, api.StateStopping, api.StateStopped) {
		t.Errorf("state events %v, want starting, running, stopping, stopped in that order", states)
	}
	if !inOrder(types, api.EventApplied, api.EventState, api.EventExit) {
		t.Errorf("event types %v, want applied, then state, then exit", types)
	}
}

// TestEventsAcrossRestart: `flyd events` outlives a daemon restart, even a
// kill: it waits for the next daemon and goes on with its events.
func TestEventsAcrossRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	events := startStream(t, d.socket, "events", "--json")
	d.waitStreams(t, 1)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "a.yaml", "name: before\ncommand: [\"@PROG@\", signals]\n"))
	events.waitLine(t, "an event of the first daemon", func(l string) bool { return strings.Contains(l, `"workload":"before"`) })
	d.kill(t)
	// Applied as the next daemon starts, before the stream is back.
	if err := os.MkdirAll(filepath.Join(d.dir, "workloads.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "workloads.d", "gap.yaml"), []byte(strings.ReplaceAll("name: gap\ncommand: [\"@PROG@\", signals]\n", "@PROG@", progBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, inDir(d.dir))
	d2.waitStreams(t, 1) // events found the new daemon
	d2.mustCLI(t, "apply", "-f", d2.writeSpec(t, "b.yaml", "name: after\ncommand: [\"@PROG@\", signals]\n"))
	events.waitLine(t, "an event of the second daemon", func(l string) bool { return strings.Contains(l, `"workload":"after"`) })
	select {
	case <-events.done:
		t.Error("flyd events ended")
	default:
	}
	// Every event once, in order, those of the gap too.
	var seqs []uint64
	gap := false
	for _, l := range events.lines() {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not an event: %q", l)
		}
		seqs = append(seqs, ev.Seq)
		gap = gap || ev.Workload == "gap" && ev.Type == api.EventApplied
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("event numbers %v: not each once in order", seqs)
		}
	}
	if !gap {
		t.Errorf("the event of the gap was not replayed: %q", events.lines())
	}
	d2.mustCLI(t, "stop", "before", "after", "gap")
}

// inOrder reports whether want is a subsequence of got.
func inOrder[T comparable](got []T, want ...T) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// TestLogsOfSeveral: `flyd logs` of several workloads, or of all, puts
// each line whole behind its workload's name, a last line without its
// newline too; with -f their lines come as they are written; a name that
// does not exist fails the command.
func TestLogsOfSeveral(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "two.yaml", `
name: a
command: ["@PROG@", "print", "2"]
---
name: bee
command: ["sh", "-c", "echo one; printf 'no newline'; exec sleep 300"]
`))
	d.waitLog(t, "a", "stderr line 2")
	d.waitLog(t, "bee", "no newline")
	want := map[string][]string{
		"a   | ": {"stdout line 1", "stderr line 1", "stdout line 2", "stderr line 2"},
		"bee | ": {"one", "no newline"},
	}
	for _, args := range [][]string{{"logs", "a", "bee"}, {"logs", "--all"}} {
		out := d.mustCLI(t, args...)
		if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 6 {
			t.Errorf("%v printed %q, want 6 whole lines", args, out)
		}
		// Interleaved in time; each workload's own lines in their order.
		for prefix, lines := range want {
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if rest, ok := strings.CutPrefix(l, prefix); ok {
					got = append(got, rest)
				}
			}
			if !slices.Equal(got, lines) {
				t.Errorf("%v printed %q behind %q, want %q", args, got, prefix, lines)
			}
		}
	}
	follow := startStream(t, d.socket, "logs", "-f", "--tail", "0", "a", "bee")
	d.waitStreams(t, 2)
	d.mustCLI(t, "restart", "a")
	follow.waitLine(t, "a's new run", func(l string) bool { return l == "a   | stderr line 2" })
	for _, l := range follow.lines() {
		if !strings.HasPrefix(l, "a   | ") {
			t.Errorf("logs -f --tail 0 printed %q", l)
		}
	}
	if _, errOut, code := runCLI(t, d.socket, "logs", "-f", "a", "nope"); code != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("logs -f of a missing workload: exit %d, %s", code, errOut)
	}
	d.mustCLI(t, "stop", "a", "bee")
}

// TestLogsInTimeOrder: lines of several workloads come in the order they
// were written, dated with --timestamps, and --since leaves out what
// was written before it.
func TestLogsInTimeOrder(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "two.yaml", `
name: early
command: ["sh", "-c", "echo e1; sleep 3; echo e2; exec sleep 300"]
---
name: late
command: ["sh", "-c", "sleep 1.5; echo l1; exec sleep 300"]
`))
	d.waitLog(t, "late", "l1")
	between := time.Now()
	d.waitLog(t, "early", "e2")
	// Dated once the daemon has looked at the logs: within a second or two.
	var out string
	eventually(t, "the logs in time order", func() error {
		out = d.mustCLI(t, "logs", "--timestamps", "late", "early")
		if got := stampedLines(t, out); !slices.Equal(got, []string{"early | e1", "late  | l1", "early | e2"}) {
			return fmt.Errorf("printed %q", out)
		}
		return nil
	})
	since := d.mustCLI(t, "logs", "--since", between.Format(time.RFC3339Nano), "early", "late")
	if since != "early | e2\n" {
		t.Errorf("--since %s printed %q, want e2 alone", between.Format(time.RFC3339Nano), since)
	}
	if out := d.mustCLI(t, "logs", "--since", "1h", "late"); out != "l1\n" {
		t.Errorf("--since 1h printed %q", out)
	}
	d.mustCLI(t, "stop", "early", "late")
}

// stampedLines checks that every line of out begins, behind its name,
// with a time no earlier than the line before it, and returns the
// lines without their times.
func stampedLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	var last time.Time
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		name, rest, _ := strings.Cut(l, "| ")
		stamp, text, _ := strings.Cut(rest, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Fatalf("line %q has no time: %v", l, err)
		}
		if at.Before(last) {
			t.Fatalf("line %q is dated before the line above it (%s)", l, last)
		}
		if d := time.Since(at); d < 0 || d > time.Minute {
			t.Fatalf("line %q is dated %s ago", l, d)
		}
		last = at
		lines = append(lines, name+"| "+text)
	}
	return lines
}

// TestLogsFollowAcrossRestart: `flyd logs -f --all` goes on across a
// daemon restart, and across rotations, printing each line exactly once.
func TestLogsFollowAcrossRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, withArgs("--log-max-size", "2Ki"))
	counter := `["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo n $i ................................................; sleep 0.02; done"]`
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "two.yaml", "name: c1\ncommand: "+counter+"\n---\nname: c2\ncommand: "+counter+"\n"))
	follow := startStream(t, d.socket, "logs", "-f", "--all")
	d.waitStreams(t, 2)
	count := func(name string) (n int) {
		for _, l := range follow.lines() {
			if strings.HasPrefix(l, name+" | ") {
				n++
			}
		}
		return n
	}
	follow.waitLine(t, "a line of the first daemon", func(l string) bool { return strings.HasPrefix(l, "c2 | n 20") })
	d.kill(t)
	time.Sleep(time.Second) // lines written while no daemon runs
	before := count("c1")
	d2 := startDaemon(t, inDir(d.dir), withArgs("--log-max-size", "2Ki"))
	d2.waitStreams(t, 2)
	eventually(t, "lines of the second daemon", func() error {
		if n := count("c1"); n < before+150 {
			return fmt.Errorf("%d lines of c1, %d before the restart", n, before)
		}
		_, err := os.Stat(filepath.Join(d.stateDir, "logs", "c1.log.2"))
		return err // rotated twice, once under each daemon at least
	})
	d2.mustCLI(t, "stop", "c1", "c2")
	for _, name := range []string{"c1", "c2"} {
		next := 1
		var mine []string
		for _, l := range follow.lines() {
			if rest, ok := strings.CutPrefix(l, name+" | "); ok {
				mine = append(mine, rest)
			}
		}
		// The stop signals the cgroup's processes one by one: a `sleep`
		// signalled before its shell is reported by the shell, last.
		if len(mine) > 0 && mine[len(mine)-1] == "Terminated" {
			mine = mine[:len(mine)-1]
		}
		for _, rest := range mine {
			if rest != fmt.Sprintf("n %d %s", next, strings.Repeat(".", 48)) {
				t.Fatalf("%s: printed %q where n %d was due", name, rest, next)
			}
			next++
		}
	}
}
