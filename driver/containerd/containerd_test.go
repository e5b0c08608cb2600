package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
	"github.com/flyd-dev/flyd/driver/drivertest"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

const testImage = "docker.io/library/bbox:latest"

var (
	skipReason string
	socket     string
	archive    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "containerd tests need root"
	default:
		for _, b := range []string{"containerd", "runc", "ctr"} {
			if _, err := exec.LookPath(b); err != nil {
				skipReason = "containerd tests need " + b + " (apt-get install containerd runc)"
			}
		}
		if _, err := os.Stat(ctrtest.Busybox); err != nil && skipReason == "" {
			skipReason = "containerd tests need busybox-static"
		}
	}
	if skipReason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "flyd-ctr-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Containers started without a cgroup of flyd's get runc's default,
	// under a cgroup named after the containerd namespace: remove those
	// (empty) once the tests are done, so the tests leave no cgroup.
	defer removeCgroups("flyd-test")
	archive = filepath.Join(dir, "bbox.tar")
	if err := ctrtest.BusyboxArchive(archive, testImage); err != nil {
		fmt.Fprintln(os.Stderr, "busybox archive:", err)
		return 1
	}
	dm, err := ctrtest.StartDaemon(filepath.Join(dir, "d"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		dm.Stop()
		// Snapshots may still be mounted if a test failed midway.
		_ = exec.Command("sh", "-c", "grep -o '"+dir+"[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l").Run()
	}()
	socket = dm.Socket
	return m.Run()
}

func setup(t testing.TB) *Driver {
	t.Helper()
	if skipReason != "" {
		testenv.Skip(t, skipReason)
	}
	d := New(socket, "flyd-test")
	t.Cleanup(func() { d.Close() })
	return d
}

func task(t testing.TB, name string, args ...string) *driver.Task {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	return &driver.Task{
		Workload: name,
		Spec: &spec.Workload{Name: name, Kind: spec.KindContainerd,
			Containerd: &spec.Containerd{Image: testImage, Archive: archive}},
		Args: args,
		Log:  logf,
	}
}

func waitLog(t *testing.T, tk *driver.Task, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(tk.Log.Name())
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("log never got %q; it has:\n%s", want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDone(t *testing.T, p driver.Process) driver.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(15 * time.Second):
		_ = p.Kill()
		t.Fatal("process did not end")
		return driver.Exit{}
	}
}

// leftovers lists containers, tasks and active snapshots of the namespace.
func leftovers(t *testing.T, d *Driver) []string {
	t.Helper()
	c, err := d.conn()
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.ctx(context.Background())
	var out []string
	ctrs, err := c.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ctrs {
		out = append(out, "container "+x.ID())
	}
	ts, err := c.TaskService().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = ts
	for _, tk := range ts.GetTasks() {
		out = append(out, "task "+tk.GetID())
	}
	for _, sn := range []string{"overlayfs", "native"} {
		_ = c.SnapshotService(sn).Walk(ctx, func(_ context.Context, i snapshots.Info) error {
			if i.Kind == snapshots.KindActive {
				out = append(out, "snapshot "+sn+"/"+i.Name)
			}
			return nil
		})
	}
	return out
}

func TestRunLogEnvSignalKill(t *testing.T) {
	d := setup(t)
	ctx := context.Background()
	// A container's pid 1 ignores signals it has no handler for: trap TERM.
	tk := task(t, "hello", "sh", "-c", "trap 'echo got-term; exit 143' TERM; echo hi; env; sleep 100 & wait")
	tk.Env = []string{"FOO=bar", "PATH=/bin:/usr/bin:/task", "CODEFLY__RUNTIME_CONTEXT=container"}
	var prep []string
	tk.Preparing = func(s string) { prep = append(prep, s) }
	p, err := d.Start(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	st := p.State()
	if st.Driver != spec.KindContainerd || !strings.HasPrefix(st.ID, "hello-") || st.PID <= 0 || st.StartedAt.IsZero() {
		t.Fatalf("state %+v", st)
	}
	log := waitLog(t, tk, "FOO=bar")
	for _, w := range []string{"hi\n", "CODEFLY__RUNTIME_CONTEXT=container", "PATH=/bin:/usr/bin:/task"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	t.Logf("preparing: %q", prep)
	if len(prep) != 1 || !strings.HasPrefix(prep[0], "importing ") {
		t.Errorf("preparing: %q", prep)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e := waitDone(t, p)
	waitLog(t, tk, "got-term")
	if e.Code != 143 || e.Unknown {
		t.Fatalf("exit after SIGTERM: %+v", e)
	}
	t.Logf("exit after SIGTERM: %+v", e)
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}

	// Kill, and a second start reuses the imported image without importing.
	tk2 := task(t, "hello", "sleep", "100")
	prep = nil
	tk2.Preparing = func(s string) { prep = append(prep, s) }
	p2, err := d.Start(ctx, tk2)
	if err != nil {
		t.Fatal(err)
	}
	if len(prep) != 0 {
		t.Errorf("re-imported: %q", prep)
	}
	if err := p2.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p2); e.Signal != "SIGKILL" || e.Code != 137 {
		t.Fatalf("exit after Kill: %+v", e)
	}
	if err := p2.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("signal after exit: %v", err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}

	// A normal exit code.
	tk3 := task(t, "hello", "sh", "-c", "exit 3")
	p3, err := d.Start(ctx, tk3)
	if err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p3); e.Code != 3 || e.Signal != "" || e.Unknown {
		t.Fatalf("exit: %+v", e)
	}
}

func TestUserFromImage(t *testing.T) {
	d := setup(t)
	tk := task(t, "user", "sh", "-c", "echo uid=$(id -u) gid=$(id -g) home=$HOME")
	tk.Spec.User = "nobody"
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p); !e.Success() {
		t.Fatalf("exit %+v", e)
	}
	b, _ := os.ReadFile(tk.Log.Name())
	if !strings.Contains(string(b), "uid=65534 gid=65534") {
		t.Fatalf("log: %s", b)
	}

	tk = task(t, "user", "true")
	tk.Spec.User = "nosuchuser"
	if _, err := d.Start(context.Background(), tk); err == nil || !errors.Is(err, driver.ErrExec) {
		t.Fatalf("unknown user: %v", err)
	} else {
		t.Logf("unknown user: %v", err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

func TestCarriers(t *testing.T) {
	d := setup(t)
	big := strings.Repeat("0123456789abcdef", 40*1024/16)
	sum := sha256.Sum256([]byte(big))
	tk := task(t, "carrier", "sh", "-c",
		`stat -c '%n %a %u %g %s' /codefly/configuration /codefly/configuration/BIG; echo "ptr=$CODEFLY__FILE__BIG"; sha256sum /codefly/configuration/BIG; echo done`)
	tk.Spec.User = "app"
	tk.Files = []carriers.File{{Key: "BIG", Value: big}}
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p); !e.Success() {
		b, _ := os.ReadFile(tk.Log.Name())
		t.Fatalf("exit %+v: %s", e, b)
	}
	b, _ := os.ReadFile(tk.Log.Name())
	log := string(b)
	for _, w := range []string{
		"/codefly/configuration 500 1000 1000",
		"/codefly/configuration/BIG 400 1000 1000 40960",
		"ptr=/codefly/configuration/BIG",
		hex.EncodeToString(sum[:]),
	} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

func TestNetwork(t *testing.T) {
	d := setup(t)
	nets, err := sandbox.NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nw, err := nets.Ensure("x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nets.Delete("x") })
	const port = 28381
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	tk := task(t, "net", "httpd", "-f", "-p", addr, "-h", "/etc")
	tk.Network = nw
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(); waitDone(t, p) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = nw.Do(func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reachable inside the network: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("reachable from the host namespace")
	}
}

func TestRecoverAfterRestart(t *testing.T) {
	d := setup(t)
	tk := task(t, "adopt", "sh", "-c", "echo started; sleep 100")
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, tk, "started")
	st := p.State()
	p.Release()
	d.Close()

	d2 := New(socket, "flyd-test")
	defer d2.Close()
	p2, err := d2.Recover(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if p2.State().ID != st.ID || p2.State().PID != st.PID {
		t.Fatalf("state %+v vs %+v", p2.State(), st)
	}
	if err := p2.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p2); e.Signal != "SIGKILL" {
		t.Fatalf("exit %+v", e)
	}
	if l := leftovers(t, d2); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
	if _, err := d2.Recover(context.Background(), st); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("recover gone: %v", err)
	}

	// A task that ended while no daemon watched still reports its exit.
	tk = task(t, "adopt", "sh", "-c", "sleep 0.3; exit 7")
	p, err = d2.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	st = p.State()
	p.Release()
	time.Sleep(600 * time.Millisecond)
	p3, err := New(socket, "flyd-test").Recover(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if e := waitDone(t, p3); e.Code != 7 {
		t.Fatalf("exit %+v", e)
	}
}

func TestSweep(t *testing.T) {
	d := setup(t)
	var ps []driver.Process
	for _, n := range []string{"keep", "drop", "drop"} {
		p, err := d.Start(context.Background(), task(t, n, "sleep", "100"))
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
		ps = append(ps, p)
	}
	if err := d.Sweep(context.Background(), map[string]bool{"keep": true}); err != nil {
		t.Fatal(err)
	}
	l := leftovers(t, d)
	for _, x := range l {
		if strings.Contains(x, "drop-") {
			t.Errorf("not swept: %s", x)
		}
	}
	if !strings.Contains(strings.Join(l, " "), "container keep-") {
		t.Errorf("kept container gone: %v", l)
	}
	if err := d.Sweep(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

func TestErrors(t *testing.T) {
	d := setup(t)
	ctx := context.Background()

	bad := filepath.Join(t.TempDir(), "bad.tar")
	os.WriteFile(bad, []byte("not a tar archive at all"), 0o644)
	tk := task(t, "bad", "true")
	tk.Spec.Containerd = &spec.Containerd{Image: "docker.io/library/bad:1", Archive: bad}
	_, err := d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "import image archive") {
		t.Errorf("bad archive: %v", err)
	}
	t.Logf("bad archive: %v", err)

	tk.Spec.Containerd = &spec.Containerd{Image: "docker.io/library/missing:1"}
	_, err = d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "not in containerd namespace") {
		t.Errorf("missing image: %v", err)
	}
	t.Logf("missing image: %v", err)

	tk.Spec.Containerd = &spec.Containerd{Image: "docker.io/library/other:1", Archive: archive}
	_, err = d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "does not contain it") {
		t.Errorf("archive without the image: %v", err)
	}

	tk = task(t, "bad", "/no/such/program")
	_, err = d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) {
		t.Errorf("missing program: %v", err)
	}
	t.Logf("missing program: %v", err)
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}

	wrong := New(filepath.Join(t.TempDir(), "nope.sock"), "")
	if err := wrong.Available(ctx); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("wrong socket: %v", err)
	}
	if err := d.Available(ctx); err != nil {
		t.Errorf("available: %v", err)
	}
	if _, err := d.Recover(ctx, driver.State{ID: "nope-1234"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("recover unknown: %v", err)
	}
}

var _ = containerd.WithKillAll

func BenchmarkDriverTrue(b *testing.B) {
	d := setup(b)
	ctx := context.Background()
	tk := task(b, "bench", "true")
	for b.Loop() {
		p, err := d.Start(ctx, tk)
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
		if !p.Exit().Success() {
			b.Fatal(p.Exit())
		}
	}
}

func BenchmarkCtrRunTrue(b *testing.B) {
	d := setup(b)
	// Make sure the image is imported and unpacked.
	p, err := d.Start(context.Background(), task(b, "bench", "true"))
	if err != nil {
		b.Fatal(err)
	}
	<-p.Done()
	i := 0
	for b.Loop() {
		i++
		out, err := exec.Command("ctr", "--address", socket, "-n", "flyd-test", "run", "--rm", "--net-host",
			testImage, fmt.Sprintf("ctrbench-%d", i), "true").CombinedOutput()
		if err != nil {
			b.Fatalf("ctr run: %v: %s", err, out)
		}
	}
}

// removeCgroups removes the empty cgroup parent in every hierarchy, and
// the empty cgroups under it.
func removeCgroups(parent string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	if more, _ := filepath.Glob("/sys/fs/cgroup/" + parent); len(more) > 0 {
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(d, e.Name()))
			}
		}
		_ = os.Remove(d)
	}
}

// TestContract runs the driver contract against a real containerd: the
// scripts run in the busybox image.
func TestContract(t *testing.T) {
	d := setup(t)
	drivertest.Run(t, drivertest.Harness{
		Driver: d,
		Task: func(t *testing.T, name, script string) *driver.Task {
			return task(t, name, "sh", "-c", script)
		},
		AdoptedExitKnown: true,
	})
}

// TestLimitsWithoutFlydsCgroup: a container that runs in a cgroup of its
// own (the host gives flyd none) gets the task's limits through OCI, as
// its cgroup on the host shows.
func TestLimitsWithoutFlydsCgroup(t *testing.T) {
	d := setup(t)
	tk := task(t, "limited", "sh", "-c", "echo ready; exec sleep 30")
	tk.Limits = sandbox.Limits{MemoryMax: 64 << 20, PidsMax: 50}
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(); <-p.Done() }()
	waitLog(t, tk, "ready")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.State().PID))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"memory": {"memory.limit_in_bytes", strconv.Itoa(64 << 20)}, "pids": {"pids.max", "50"}}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if parts[0] == "0" && parts[1] == "" && len(want) == 2 {
			// cgroup v2: one hierarchy, other file names.
			for _, f := range [][2]string{{"memory.max", strconv.Itoa(64 << 20)}, {"pids.max", "50"}} {
				got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[2], f[0]))
				if err == nil && strings.TrimSpace(string(got)) != f[1] {
					t.Errorf("%s of the container's cgroup %s: %q, want %s", f[0], parts[2], got, f[1])
				}
			}
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			w, ok := want[ctrl]
			if !ok {
				continue
			}
			got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, parts[2], w[0]))
			if err != nil || strings.TrimSpace(string(got)) != w[1] {
				t.Errorf("%s of the container's cgroup %s: %q (%v), want %s", w[0], parts[2], got, err, w[1])
			}
			delete(want, ctrl)
		}
	}
}
