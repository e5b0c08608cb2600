package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
)

var testEnv = []string{"PATH=/usr/bin:/bin"}

func TestExec(t *testing.T) {
	t.Setenv("FLYD_HEALTH_DAEMON_ONLY", "daemon-value")
	secretEnv := append([]string{"API_TOKEN=tok-123456"}, testEnv...)
	tests := []struct {
		name    string
		argv    []string
		env     []string
		timeout time.Duration
		wantErr []string // substrings; none: healthy
		notIn   []string // never in the error
		is      error
		orphans string // a marker argument no process may carry afterwards
	}{
		{name: "true", argv: []string{"true"}},
		{name: "false", argv: []string{"false"}, wantErr: []string{"exec false: exit status 1"}},
		{
			name:    "exit status and output",
			argv:    []string{"sh", "-c", `echo starting; echo "disk full" >&2; exit 3`},
			wantErr: []string{"exec sh: exit status 3", `output: "starting\ndisk full"`},
			notIn:   []string{"-c", "echo"},
		},
		{
			name:    "environment values hidden in output",
			argv:    []string{"sh", "-c", `echo "token is $API_TOKEN"; exit 1`},
			env:     secretEnv,
			wantErr: []string{`token is [redacted]`},
			notIn:   []string{"tok-123456", "/usr/bin:/bin"},
		},
		{
			name:    "only the end of long output",
			argv:    []string{"sh", "-c", `i=0; while [ $i -lt 200 ]; do echo "line $i"; i=$((i+1)); done; exit 1`},
			wantErr: []string{"line 199"},
			notIn:   []string{"line 150"},
		},
		{
			name: "no daemon environment",
			argv: []string{"sh", "-c", `test -z "$FLYD_HEALTH_DAEMON_ONLY"`},
		},
		{
			name:    "not found",
			argv:    []string{"flyd-no-such-probe"},
			wantErr: []string{"flyd-no-such-probe", "not found"},
			notIn:   []string{"/usr/bin"},
			is:      errdefs.ErrNotFound,
		},
		{
			name:    "no PATH",
			argv:    []string{"true"},
			env:     []string{},
			wantErr: []string{"not found"},
		},
		{name: "empty", argv: nil, wantErr: []string{"empty command"}, is: errdefs.ErrInvalid},
		{
			name:    "timeout kills",
			argv:    []string{"sleep", "10.0101"},
			timeout: 100 * time.Millisecond,
			wantErr: []string{"exec sleep: no result in time, killed"},
			is:      context.DeadlineExceeded,
			orphans: "10.0101",
		},
		{
			name:    "timeout kills the whole group",
			argv:    []string{"sh", "-c", "sleep 10.0102 & sleep 10.0103; :"},
			timeout: 100 * time.Millisecond,
			wantErr: []string{"killed"},
			is:      context.DeadlineExceeded,
			orphans: "10.010",
		},
		{
			name:    "background left behind is killed",
			argv:    []string{"sh", "-c", "sleep 10.0104 & sleep 0.05; exit 0"},
			orphans: "10.0104",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv
			if tt.env != nil {
				env = tt.env
			}
			timeout := cmp(tt.timeout, 2*time.Second)
			err, took := check(Exec(nil, nil, sandbox.Mounts{}, nil, tt.argv, env), timeout)
			t.Logf("Check = %v (%s)", err, took)
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("Check = %v, want healthy", err)
			}
			if len(tt.wantErr) > 0 && err == nil {
				t.Fatalf("Check = nil, want an error containing %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			for _, s := range tt.notIn {
				if err != nil && strings.Contains(err.Error(), s) {
					t.Errorf("error %q contains %q", err, s)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Check = %v, want it to wrap %v", err, tt.is)
			}
			if took > timeout/2+time.Second/2 {
				t.Errorf("Check took %s", took)
			}
			if tt.orphans != "" {
				waitGone(t, tt.orphans)
			}
		})
	}
}

// TestExecEscapedOutputHolder: a process that left the command's group is
// out of the check's reach, but holding the output pipe open must not turn
// an exit 0 into a timeout.
func TestExecEscapedOutputHolder(t *testing.T) {
	const marker = "5.0105"
	argv := []string{"sh", "-c", "setsid sleep " + marker + " & sleep 0.1; exit 0"}
	err, took := check(Exec(nil, nil, sandbox.Mounts{}, nil, argv, testEnv), 2*time.Second)
	t.Cleanup(func() {
		for _, p := range pidsWith(marker) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		waitGone(t, marker)
	})
	if err != nil {
		t.Fatalf("Check = %v, want healthy", err)
	}
	if len(pidsWith(marker)) == 0 {
		t.Fatal("the escaped process is gone: this test proves nothing")
	}
	// Waiting for the holder would take the check to its 2 s timeout: a
	// bound well below it proves the check did not, on a slow emulated
	// guest too (where 0.5 s was seen).
	if took > 1500*time.Millisecond {
		t.Fatalf("Check took %s", took)
	}
}

func cmp(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// waitGone fails unless, within a moment (SIGKILL is delivered, not
// instant), no process has marker among its arguments. Zombies have no
// arguments left, so only live processes count.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := processesWith(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processesWith(marker string) []string {
	var found []string
	for _, p := range pidsWith(marker) {
		found = append(found, fmt.Sprint(p))
	}
	return found
}

// pidsWith lists the live sleep processes with marker among their
// arguments. Only sleep: a shell that ran the test's command line carries
// the marker too.
func pidsWith(marker string) []int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []int
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if args[0] != "sleep" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			found = append(found, pid)
		}
	}
	return found
}

// TestExecRunsAsItsUser: a check given the workload's credentials runs
// with them, not as the daemon.
func TestExecRunsAsItsUser(t *testing.T) {
	testenv.RequireRoot(t, "the check changes its user")
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	argv := []string{"/bin/sh", "-c", `test "$(id -u):$(id -g):$(id -G)" = "65534:65534:65534"`}
	if err, _ := check(Exec(nil, nil, sandbox.Mounts{}, nobody, argv, testEnv), 2*time.Second); err != nil {
		t.Fatalf("as nobody: %v", err)
	}
	if err, _ := check(Exec(nil, nil, sandbox.Mounts{}, nil, argv, testEnv), 2*time.Second); err == nil {
		t.Fatal("without credentials the check ran as nobody too")
	}
}
