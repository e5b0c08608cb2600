package native

import (
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

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// forkingTask is a task whose program daemonizes, in a cgroup of its own,
// with its pid file in a directory of the test's (0755, root's).
func forkingTask(t *testing.T, script string) (*driver.Task, string) {
	t.Helper()
	testenv.RequireRoot(t, "a daemonizing program is told apart by its cgroup")
	cgs, err := sandbox.NewCgroups(fmt.Sprintf("flyd-test-forking-%d", os.Getpid()))
	if err != nil {
		testenv.Skip(t, err.Error())
	}
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	cg, err := cgs.Create(name, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cg.Kill(ctx)
		_ = cg.Delete()
		_ = cgs.RemoveParent()
	})
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's own directories are 0777 under a sticky /tmp only when
	// TMPDIR says so; make the chain the test's alone.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	pidFile := filepath.Join(dir, "d.pid")
	tk := task(t, "sh", "-c", script)
	tk.Env = append(tk.Env, "PIDFILE="+pidFile)
	tk.Cgroup = cg
	tk.Spec.Forking = &spec.Forking{PIDFile: pidFile, Timeout: spec.Duration{Duration: 5 * time.Second}}
	return tk, pidFile
}

// subreaper makes the test process a child subreaper, as the daemon is,
// while the test runs.
func subreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
}

// daemonize forks sleep into the background, writes its pid, and exits 0.
const daemonize = `sleep 100 </dev/null >/dev/null 2>&1 & echo $! > "$PIDFILE"; exit 0`

func TestForkingFollowsThePIDFile(t *testing.T) {
	subreaper(t)
	tk, _ := forkingTask(t, daemonize)
	p, err := Driver{}.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.State().PID
	// The forked shell execs sleep in place, its pid unchanged.
	var comm []byte
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if comm, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
	}
	if strings.TrimSpace(string(comm)) != "sleep" {
		t.Fatalf("the run's pid %d is %q, want the forked sleep", pid, comm)
	}
	var rs runState
	if err := p.State().Decode(&rs); err != nil || rs.PIDFile == "" || rs.StartTicks == 0 {
		t.Fatalf("the run state keeps %+v (%v): want the followed process's start time and its pid file", rs, err)
	}
	// The launcher exited 0: the run goes on.
	select {
	case <-p.Done():
		t.Fatalf("the run ended with its launcher: %v", p.Exit())
	case <-time.After(300 * time.Millisecond):
	}
	// The followed process is the test's child now (a subreaper's): its
	// real status is collected.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Unknown || e.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v (%s), want killed by SIGKILL", e, e)
	}
}

func TestForkingMainSignalReachesTheFollowedProcess(t *testing.T) {
	subreaper(t)
	tk, _ := forkingTask(t, `sh -c 'trap "exit 7" TERM; echo $$ > "$PIDFILE"; while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 & exit 0`)
	p, err := Driver{}.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SignalMain(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Unknown || e.Code != 7 {
		t.Fatalf("exit = %+v (%s), want exit code 7 from the followed process's trap", e, e)
	}
}

func TestForkingRefusals(t *testing.T) {
	outsider := func(t *testing.T) int {
		c := startOutside(t, "sleep", "100")
		return c
	}
	tests := []struct {
		name    string
		script  string
		prepare func(t *testing.T, pidFile string) string // returns a part of the error
		exec    bool                                      // ErrExec: retrying cannot help
	}{
		{"launcher fails", `exit 3`, func(*testing.T, string) string { return "exit code 3" }, false},
		{"nothing left", `exit 0`, func(*testing.T, string) string { return "left no process" }, false},
		{"a pid outside the cgroup", `sleep 100 </dev/null >/dev/null 2>&1 & exit 0`, func(t *testing.T, pidFile string) string {
			pid := outsider(t)
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("names pid %d, which is not a process of the workload's cgroup: not followed", pid)
		}, false},
		{"directory writable by others", daemonize, func(t *testing.T, pidFile string) string {
			if err := os.Chmod(filepath.Dir(pidFile), 0o777); err != nil {
				t.Fatal(err)
			}
			return "forking.pid_file " + pidFile + ": directory " + filepath.Dir(pidFile) + " is writable by its group or others"
		}, true},
		{"file of another user", `sleep 100 </dev/null >/dev/null 2>&1 & exit 0`, func(t *testing.T, pidFile string) string {
			if err := os.WriteFile(pidFile, []byte("1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(pidFile, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return "forking.pid_file " + pidFile + ": file is owned by uid 65534"
		}, true},
		{"file writable by others", `sleep 100 </dev/null >/dev/null 2>&1 & exit 0`, func(t *testing.T, pidFile string) string {
			if err := os.WriteFile(pidFile, []byte("1\n"), 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(pidFile, 0o666); err != nil {
				t.Fatal(err)
			}
			return "forking.pid_file " + pidFile + ": file is writable by its group or others"
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, pidFile := forkingTask(t, tt.script)
			tk.Spec.Forking.Timeout.Duration = time.Second
			want := tt.prepare(t, pidFile)
			p, err := Driver{}.Start(context.Background(), tk)
			if err == nil {
				p.Kill()
				wait(t, p)
				t.Fatalf("started (pid %d), want an error saying %q", p.State().PID, want)
			}
			if !strings.Contains(err.Error(), want) || errors.Is(err, driver.ErrExec) != tt.exec {
				t.Fatalf("error %q (ErrExec %v): want %q (ErrExec %v)", err, errors.Is(err, driver.ErrExec), want, tt.exec)
			}
			if procs, _ := tk.Cgroup.Procs(); len(procs) > 0 {
				t.Errorf("a failed start left %v in the cgroup", procs)
			}
		})
	}
}

func TestForkingNeedsCgroups(t *testing.T) {
	tk := task(t, "true")
	tk.Spec.Forking = &spec.Forking{PIDFile: "/run/x.pid", Timeout: spec.Duration{Duration: time.Second}}
	if _, err := (Driver{}).Start(context.Background(), tk); !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "forking") {
		t.Fatalf("Start without a cgroup: %v, want ErrExec naming forking", err)
	}
}

func TestForkingAdoption(t *testing.T) {
	subreaper(t)
	tk, _ := forkingTask(t, daemonize)
	p, err := Driver{}.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	st := p.State()
	p.Release()
	cgs, err := sandbox.NewCgroups(fmt.Sprintf("flyd-test-forking-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	q, err := Driver{Cgroups: cgs}.Recover(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if q.State().PID != st.PID {
		t.Fatalf("adopted pid %d, want the followed %d", q.State().PID, st.PID)
	}
	// The followed process is the test's child (a subreaper's), reaped
	// here as the daemon's reaper of orphans would.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(st.PID, &ws, 0, nil)
	}()
	if err := q.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, q); !e.Unknown {
		t.Fatalf("adopted exit = %+v, want unknown", e)
	}
	<-q.(driver.Reaped).Reaped()
	<-reaped
}

// startOutside starts argv outside any workload's cgroup and returns its pid; it
// is killed and reaped when the test ends.
func startOutside(t *testing.T, argv ...string) int {
	t.Helper()
	p, err := os.StartProcess("/usr/bin/"+argv[0], argv, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		_, _ = p.Wait()
	})
	return p.Pid
}
