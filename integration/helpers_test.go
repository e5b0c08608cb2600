package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// cliCmd is the CLI binary pointed at socket.
func cliCmd(ctx context.Context, socket string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, flydBin, args...)
	cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+socket)
	return cmd
}

// runCLI runs the CLI to completion.
func runCLI(t *testing.T, socket string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitFor)
	defer cancel()
	return runCmd(t, cliCmd(ctx, socket, args...))
}

func runCmd(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, exitCode int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
	default:
		t.Fatalf("%s: %v\nstderr: %s", strings.Join(cmd.Args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func (d *daemon) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, d.socket, args...)
	if code != 0 {
		t.Fatalf("flyd %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// writeSpec writes a spec file into the daemon's dir; @PROG@ stands for
// the test's testprog.
func (d *daemon) writeSpec(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(d.dir, name)
	text = strings.ReplaceAll(text, "@PROG@", d.prog)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspect is `flyd inspect --json NAME`.
func (d *daemon) inspect(t *testing.T, name string) *api.Workload {
	t.Helper()
	var w api.Workload
	decodeJSON(t, d.mustCLI(t, "inspect", "--json", name), &w)
	return &w
}

func decodeJSON(t *testing.T, text string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("decoding %q: %v", text, err)
	}
}

func (d *daemon) get(t *testing.T, name string) *api.Workload {
	t.Helper()
	w, err := d.client.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return w
}

// waitWorkload polls the workload until ok accepts it.
func (d *daemon) waitWorkload(t *testing.T, name, what string, ok func(w *api.Workload) bool) *api.Workload {
	t.Helper()
	var last *api.Workload
	eventually(t, fmt.Sprintf("%s: %s", name, what), func() error {
		w, err := d.client.Get(context.Background(), name)
		if err != nil {
			return err
		}
		last = w
		if !ok(w) {
			return fmt.Errorf("state %s, pid %d, restarts %d, last exit %v, last error %q",
				w.State, w.PID, w.Restarts, w.LastExit, w.LastError)
		}
		return nil
	})
	return last
}

func (d *daemon) waitState(t *testing.T, name string, st api.State) *api.Workload {
	t.Helper()
	return d.waitWorkload(t, name, "state "+string(st), func(w *api.Workload) bool { return w.State == st })
}

// logs is the whole log of a workload.
func (d *daemon) logs(t *testing.T, name string) string {
	t.Helper()
	var b bytes.Buffer
	if err := d.client.Logs(context.Background(), name, api.LogQuery{Tail: -1}, api.WriteLog(&b)); err != nil {
		t.Fatalf("logs %s: %v", name, err)
	}
	return b.String()
}

// waitLog polls the workload's log until it holds want.
func (d *daemon) waitLog(t *testing.T, name, want string) string {
	t.Helper()
	var text string
	eventually(t, fmt.Sprintf("log of %s holds %q", name, want), func() error {
		text = d.logs(t, name)
		if !strings.Contains(text, want) {
			return fmt.Errorf("log so far:\n%s", text)
		}
		return nil
	})
	return text
}

func (d *daemon) streams(t *testing.T) int64 {
	t.Helper()
	st, err := d.client.Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st.Streams
}

func (d *daemon) waitStreams(t *testing.T, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d open streams", n), func() error {
		if got := d.streams(t); got != n {
			return fmt.Errorf("status says %d", got)
		}
		return nil
	})
}

// eventually polls f until it returns nil, and fails the test with its last
// error after waitFor.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", waitFor, what, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// stream is a CLI command running in the background whose stdout is
// collected line by line.
type stream struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	buf  []string
	done chan struct{}
}

func startStream(t *testing.T, socket string, args ...string) *stream {
	t.Helper()
	return startCmdStream(t, cliCmd(context.Background(), socket, args...))
}

// startCmdStream is startStream of a command made ready by the caller
// (another user's, say).
func startCmdStream(t *testing.T, cmd *exec.Cmd) *stream {
	t.Helper()
	s := &stream{cmd: cmd, done: make(chan struct{})}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer // read only once the command is done
	s.cmd.Stderr = &errOut
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.mu.Lock()
			s.buf = append(s.buf, sc.Text())
			s.mu.Unlock()
		}
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
		if t.Failed() && errOut.Len() > 0 {
			t.Logf("stderr of %v:\n%s", s.cmd.Args[1:], errOut.String())
		}
	})
	return s
}

func (s *stream) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.buf...)
}

// waitLine polls until a line satisfies ok and returns it.
func (s *stream) waitLine(t *testing.T, what string, ok func(line string) bool) string {
	t.Helper()
	var found string
	eventually(t, what, func() error {
		for _, l := range s.lines() {
			if ok(l) {
				found = l
				return nil
			}
		}
		return fmt.Errorf("%d lines so far: %q", len(s.lines()), s.lines())
	})
	return found
}

// usersGroup is the gid of the group "users", which the tests of
// --socket-group make the socket's.
func usersGroup(t *testing.T) int {
	t.Helper()
	g, err := user.LookupGroup("users")
	if err != nil {
		t.Skipf("no group users on this host to test --socket-group with: %v", err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	return gid
}
