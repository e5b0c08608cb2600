package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/drivertest"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func task(t *testing.T, args ...string) *driver.Task {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return &driver.Task{
		Workload: "t",
		Spec:     &spec.Workload{Name: "t", Command: args},
		Args:     args,
		Env:      []string{"PATH=/usr/bin:/bin"},
		Log:      log,
	}
}

func wait(t *testing.T, p driver.Process) driver.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(10 * time.Second):
		t.Fatal("process did not end")
		return driver.Exit{}
	}
}

func TestExitStatusAndSignal(t *testing.T) {
	p, err := Driver{}.Start(context.Background(), task(t, "sh", "-c", "exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Code != 7 || e.Signal != "" || e.Unknown {
		t.Fatalf("exit = %+v, want code 7", e)
	}
	p, err = Driver{}.Start(context.Background(), task(t, "sleep", "100"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Signal != "SIGUSR1" {
		t.Fatalf("exit = %+v, want SIGUSR1", e)
	}
}

func TestStartFailuresAreExecErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*driver.Task)
		want string
	}{
		{"missing program", func(tk *driver.Task) { tk.Args = []string{"/nonexistent/prog"} }, "/nonexistent/prog"},
		{"not on PATH", func(tk *driver.Task) { tk.Args = []string{"no-such-program-here"} }, "no-such-program-here"},
		{"not executable", func(tk *driver.Task) { tk.Args = []string{"/etc/hostname"} }, "/etc/hostname"},
		{"missing workdir", func(tk *driver.Task) { tk.Spec.Workdir = "/nonexistent/dir" }, "workdir"},
		{"unknown user", func(tk *driver.Task) { tk.Spec.User = "no-such-user-here" }, "no-such-user-here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := task(t, "true")
			tt.mod(tk)
			_, err := Driver{}.Start(context.Background(), tk)
			if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start error %v: want ErrExec naming %q", err, tt.want)
			}
		})
	}
}

func TestReleaseLeavesTheProcessAndRecoverAdoptsIt(t *testing.T) {
	p, err := Driver{}.Start(context.Background(), task(t, "sleep", "100"))
	if err != nil {
		t.Fatal(err)
	}
	st := p.State()
	p.Release()
	if err := syscall.Kill(st.PID, 0); err != nil {
		t.Fatalf("released process is gone: %v", err)
	}

	// A record whose start time does not match is a different process
	// that reused the pid: never adopted.
	var rs runState
	if err := st.Decode(&rs); err != nil || rs.StartTicks == 0 || rs.BootID == "" {
		t.Fatalf("the state keeps %+v (%v): no identity", rs, err)
	}
	with := func(change func(*runState)) driver.State {
		r := rs
		change(&r)
		s := st
		if err := s.Encode(stateVersion, r); err != nil {
			t.Fatal(err)
		}
		return s
	}
	wrong := with(func(r *runState) { r.StartTicks++ })
	if _, err := (Driver{}).Recover(context.Background(), wrong); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Recover with a wrong start time: %v, want ErrNotFound", err)
	}
	otherBoot := with(func(r *runState) { r.BootID = "another-boot" })
	if _, err := (Driver{}).Recover(context.Background(), otherBoot); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Recover from another boot: %v, want ErrNotFound", err)
	}
	newer := st
	newer.Version = stateVersion + 1
	if _, err := (Driver{}).Recover(context.Background(), newer); err == nil || errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Recover of a newer flyd's state: %v, want a refusal that leaves the run alone", err)
	}
	// A record of a flyd before drivers kept their own state: one object
	// of every runtime's fields, version 0.
	legacy := fmt.Sprintf(`{"driver":"native","pid":%d,"start_ticks":%d,"boot_id":%q,"started_at":"2026-01-01T00:00:00Z"}`, st.PID, rs.StartTicks, rs.BootID)
	var old driver.State
	if err := json.Unmarshal([]byte(legacy), &old); err != nil {
		t.Fatal(err)
	}
	if lp, err := (Driver{}).Recover(context.Background(), old); err != nil {
		t.Fatalf("a version 0 record was not adopted: %v", err)
	} else {
		lp.Release()
	}

	q, err := Driver{}.Recover(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	// The released child is still this test's to reap, as init reaps the
	// runs of a daemon that died; the adopted run is done once it has.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(st.PID, &ws, 0, nil)
	}()
	if err := q.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not our child any more after Release: the status is unknown.
	if e := wait(t, q); !e.Unknown {
		t.Fatalf("adopted exit = %+v, want unknown", e)
	}
	select {
	case <-q.(driver.Reaped).Reaped():
	case <-time.After(reapWait + time.Second):
		t.Fatal("the adopted run's pid was never said free")
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the adopted run was said reaped while its pid was still taken (kill 0: %v)", err)
	}
	<-reaped
}

func TestLeaderExitKillsItsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child")
	p, err := Driver{}.Start(context.Background(), task(t, "sh", "-c", "sleep 100 & echo $! > "+pidfile+"; exit 0"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p)
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	child := strings.TrimSpace(string(b))
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + child + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %s outlived its group leader", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUserCredentials(t *testing.T) {
	a, err := execenv.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	if a.UID != 65534 {
		t.Fatalf("nobody has uid %d", a.UID)
	}
	byID, err := execenv.Lookup("65534")
	if err != nil || byID.Name != a.Name {
		t.Fatalf("lookup by uid: %+v, %v", byID, err)
	}
	env := execenv.FillEnv(a, []string{"HOME=/custom"})
	if strings.Join(env, " ") != "HOME=/custom USER=nobody LOGNAME=nobody" {
		t.Fatalf("fillEnv = %q", env)
	}
}

// TestContract runs the driver contract against the native runtime.
func TestContract(t *testing.T) {
	drivertest.Run(t, drivertest.Harness{
		Driver: Driver{},
		Task:   func(t *testing.T, name, script string) *driver.Task { return task(t, "sh", "-c", script) },
	})
}

// TestARunHoldsOneDescriptor: a running process costs the daemon its
// pidfd and nothing else (Go's own handle on it is released), so the open
// files limit allows a workload per descriptor; none is left once it ends.
func TestARunHoldsOneDescriptor(t *testing.T) {
	pidfds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:[pidfd]" {
				n++
			}
		}
		return n
	}
	before := pidfds()
	p, err := Driver{}.Start(context.Background(), task(t, "sleep", "100"))
	if err != nil {
		t.Fatal(err)
	}
	if n := pidfds() - before; n != 1 {
		t.Errorf("a running process holds %d pidfds, want 1", n)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Signal != "SIGKILL" || e.Code != 128+9 || e.Unknown {
		t.Errorf("exit %+v, want killed by SIGKILL, known", e)
	}
	<-p.(driver.Reaped).Reaped()
	if n := pidfds() - before; n != 0 {
		t.Errorf("%d pidfds left after the run ended", n)
	}
}

// TestRunsShareOneWatcher: runs cost no goroutine of their own while they
// run; each end is seen, whichever order they come in, and the watcher
// goes once no run is left.
func TestRunsShareOneWatcher(t *testing.T) {
	before := runtime.NumGoroutine()
	var ps []driver.Process
	for range 20 {
		p, err := Driver{}.Start(context.Background(), task(t, "sleep", "100"))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if n := runtime.NumGoroutine() - before; n > 1 {
		t.Errorf("20 runs cost %d goroutines, want at most the one watcher", n)
	}
	for i := len(ps) - 1; i >= 0; i -= 2 { // every other, from the last
		if err := ps[i].Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(ps) - 1; i >= 0; i -= 2 {
		if e := wait(t, ps[i]); e.Signal != "SIGKILL" {
			t.Errorf("run %d: exit %+v, want killed by SIGKILL", i, e)
		}
	}
	for i := 0; i < len(ps); i += 2 {
		select {
		case <-ps[i].Done():
			t.Fatalf("run %d ended with the others", i)
		default:
		}
		if err := ps[i].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(ps); i += 2 {
		if e := wait(t, ps[i]); e.Signal != "SIGTERM" {
			t.Errorf("run %d: exit %+v, want ended by SIGTERM", i, e)
		}
		<-ps[i].(driver.Reaped).Reaped()
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after every run ended", runtime.NumGoroutine()-before)
		}
	}
}
