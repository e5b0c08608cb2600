package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// The tests of a CI runner's view: what a killed run leaves (nothing),
// what a wait means, what run says and how it ends.

// sleeperStack is a project of two workloads in a network of its own.
func sleeperStack(t *testing.T, d *daemon) string {
	t.Helper()
	return d.writeSpec(t, "sleepers.yaml", `kind: network
name: net
---
name: db
network: net
command: ["@PROG@", signals]
endpoints: [{name: tcp, port: 5432}]
---
name: app
network: net
command: ["@PROG@", signals]
after: [db]
uses: [db]
`)
}

// assertProjectGone waits (up to 30 s) until nothing of project is left:
// workloads, networks, its lease, and the namespace and cgroups its
// workloads had.
func assertProjectGone(t *testing.T, d *daemon, project string, cgroups []string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx := context.Background()
		ws, err := d.client.ListProject(ctx, project)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := api.DocumentsOf[api.Network](ctx, d.client, spec.KindNetwork)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := d.client.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, w := range ws {
			left = append(left, "workload "+w.Name)
		}
		for _, n := range ns {
			if spec.ProjectOf(n.Name) == project {
				left = append(left, "network "+n.Name)
			}
		}
		for _, l := range ls {
			if l.Project == project {
				left = append(left, "lease of "+project)
			}
		}
		for _, dir := range cgroups {
			if _, err := os.Stat(dir); err == nil {
				left = append(left, "cgroup "+dir)
			}
		}
		if m, _ := filepath.Glob(filepath.Join(d.runDir, "netns", project+".*")); len(m) > 0 {
			left = append(left, m...)
		}
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second*time.Duration(timeScale()) {
			t.Fatalf("project %s: left 30 s after its client was killed: %s\n%s", project, strings.Join(left, ", "), d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// projectCgroups lists the cgroup directories of project's workloads.
func projectCgroups(d *daemon, project string) []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup/" + cgroupParent(d.dir) + "/" + project + "_*", "/sys/fs/cgroup/*/" + cgroupParent(d.dir) + "/" + project + "_*"} {
		m, _ := filepath.Glob(pattern)
		out = append(out, m...)
	}
	return out
}

// TestRunKilledLeavesNothing: SIGKILL of `flyd run` (a CI job's timeout)
// leaves the project to the daemon, which takes it down once the run's
// grace is over and says so in an event; down --stale does at once what
// the grace would.
func TestRunKilledLeavesNothing(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := sleeperStack(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	evs, err := d.client.ProjectEvents(ctx, 0, "rk")
	if err != nil {
		t.Fatal(err)
	}
	cmd := cliCmd(ctx, d.socket, "run", "-p", "rk", "--grace", "2s", "-f", file, "--", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.waitWorkload(t, "rk.app", "running", func(w *api.Workload) bool { return w.State == api.StateRunning })
	cgroups := projectCgroups(d, "rk")
	if len(cgroups) == 0 {
		t.Fatal("the project's workloads have no cgroups to watch")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed := time.Now()
	took := assertProjectGone(t, d, "rk", cgroups)
	if since := time.Since(killed); since < 1500*time.Millisecond {
		t.Errorf("taken down %s after the kill; its grace was 2s", since)
	}
	t.Logf("project gone %s after the kill", took)
	for ev := range evs {
		if ev.Type == "project" {
			if !strings.Contains(ev.Message, "its client went away") {
				t.Errorf("event: %q", ev.Message)
			}
			break
		}
	}

	// A lease no client holds: down --stale takes it at once.
	d.mustCLI(t, "up", "-p", "st", "-f", file, "--wait")
	release, err := d.client.Hold(ctx, "st", api.LeaseOptions{Grace: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if out := d.mustCLI(t, "down", "--stale"); !strings.Contains(out, "no stale project") {
		t.Errorf("down --stale while st is held: %q", out)
	}
	release()
	d.waitWorkload(t, "st.app", "its lease let go", func(*api.Workload) bool {
		ls, _ := d.client.Leases(ctx)
		return len(ls) == 1 && !ls[0].Held
	})
	if out := d.mustCLI(t, "down", "--stale"); !strings.Contains(out, "project st: its client is gone") || !strings.Contains(out, "st.app") {
		t.Errorf("down --stale: %q", out)
	}
	assertNoProjects(t, d, "st")
}

// TestGoTestKilledLeavesNothing: a Go test binary using flydtest, killed
// with SIGKILL (go test's -timeout does no cleanup either), leaves its
// project to the daemon, which takes it down.
func TestGoTestKilledLeavesNothing(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	bin := filepath.Join(d.dir, "killed.test")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goBin, "test", "-c", "-o", bin, "./testdata/killedtest")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test binary: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "TestHeld", "-test.v")
	cmd.Env = append(cleanEnv(), "FLYD_SOCKET="+d.socket, "FLYD_KILLEDTEST_PROG="+d.prog)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var project string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "PROJECT "); ok {
			project = p
			break
		}
	}
	if project == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the test binary never said its project")
	}
	cgroups := projectCgroups(d, project)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	took := assertProjectGone(t, d, project, cgroups)
	t.Logf("project %s gone %s after the test binary was killed", project, took)
}

// TestWaitForALateListener: a workload with a health check is up once
// the check has passed, not after a second of running: up --wait returns
// when the port answers, for a service that listens 3 s late.
func TestWaitForALateListener(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := d.writeSpec(t, "late.yaml", `name: late
command: [sh, -c, "sleep 3; exec @PROG@ serve 127.0.0.1:${PORT_HTTP}"]
endpoints: [{name: http}]
health: {http: {endpoint: http, path: /}}
`)
	start := time.Now()
	out := d.mustCLI(t, "up", "-p", "lw", "-f", file, "--wait")
	took := time.Since(start)
	if took < 3*time.Second {
		t.Errorf("up --wait returned after %s; the service listens after 3 s", took)
	}
	if !strings.Contains(out, "lw.late up: running, healthy") {
		t.Errorf("up --wait said %q", out)
	}
	w := d.get(t, "lw.late")
	resp, err := http.Get("http://127.0.0.1:" + fmt.Sprint(w.Ports[0].Port) + "/")
	if err != nil {
		t.Fatalf("the port refuses once up --wait said up: %v", err)
	}
	resp.Body.Close()
	d.mustCLI(t, "down", "-p", "lw")
}

// TestRunForCI: run's stdout is its command's alone; a workload of the
// project that fails while the command runs ends the run, non-zero,
// naming it with its log; SIGINT ends it 130 after the teardown; a
// failed up leaves nothing, not even its network.
func TestRunForCI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := sleeperStack(t, d)
	out, errOut, code := runCLI(t, d.socket, "run", "-p", "ro", "-f", file, "--", "echo", "only this")
	if code != 0 || out != "only this\n" {
		t.Errorf("run of echo: exit %d, stdout %q (stderr %s); want its line alone", code, out, errOut)
	}
	if !strings.Contains(errOut, "ro.app up") {
		t.Errorf("run's own lines are not on stderr: %q", errOut)
	}

	crash := d.writeSpec(t, "crash.yaml", `name: worker
command: [sh, -c, "sleep 2; echo worker lost its queue; exit 3"]
restart: {policy: on-failure}
`)
	start := time.Now()
	_, errOut, code = runCLI(t, d.socket, "run", "-p", "rc", "-f", crash, "--", "sleep", "600")
	if code != 1 || !strings.Contains(errOut, "rc.worker ended") || !strings.Contains(errOut, "worker lost its queue") {
		t.Errorf("run while a workload crashes: exit %d, %s; want 1 naming rc.worker with its log", code, errOut)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("run ended %s after its start; the worker crashed after 2 s", took)
	}
	if _, _, code := runCLI(t, d.socket, "run", "-p", "rn", "--exit-on-failure=false", "-f", crash, "--", "sleep", "3"); code != 0 {
		t.Errorf("run --exit-on-failure=false: exit %d; want its command's 0", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := cliCmd(ctx, d.socket, "run", "-p", "ri", "-f", file, "--", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.waitWorkload(t, "ri.app", "running", func(w *api.Workload) bool { return w.State == api.StateRunning })
	waitRunCommand(t, d, "ri")
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("run after SIGINT exited %d; want 130", code)
	}
	assertNoProjects(t, d, "ro", "rc", "rn", "ri")

	bad := d.writeSpec(t, "bad.yaml", `kind: network
name: net
---
name: db
network: net
command: ["@PROG@", signals]
---
name: app
network: net
command: ["@PROG@", signals]
uses: [pg]
`)
	if _, errOut, code := runCLI(t, d.socket, "up", "-p", "ci-8", "-f", bad); code != 1 || !strings.Contains(errOut, `"pg" names no workload of project ci-8`) || !strings.Contains(errOut, "nothing was made") {
		t.Errorf("up with a uses of nothing: exit %d, %s", code, errOut)
	}
	assertNoProjects(t, d, "ci-8")
}

// TestProjectShm: a project's workloads share a /dev/shm of their own,
// which neither the host nor another project sees, and which is gone with
// the project's down; the default project keeps the host's.
func TestProjectShm(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	mark := fmt.Sprintf("flyd-shm-test-%d", time.Now().UnixNano())
	file := d.writeSpec(t, "shm.yaml", fmt.Sprintf(`kind: network
name: net
---
name: writer
network: net
command: [sh, -c, "echo written > /dev/shm/%[1]s; echo wrote; exec sleep 600"]
---
name: reader
user: nobody
after: [writer]
command: [sh, -c, "while ! test -f /dev/shm/%[1]s; do sleep 0.05; done; echo seen $(cat /dev/shm/%[1]s); exec sleep 600"]
`, mark))
	other := d.writeSpec(t, "other.yaml", fmt.Sprintf(`name: look
command: [sh, -c, "sleep 0.5; if test -e /dev/shm/%[1]s; then echo sees it; else echo sees nothing; fi; exec sleep 600"]
`, mark))
	d.mustCLI(t, "up", "-p", "shm-a", "-f", file, "--wait")
	d.waitLog(t, "shm-a.reader", "seen written")
	d.mustCLI(t, "up", "-p", "shm-b", "-f", other, "--wait")
	d.waitLog(t, "shm-b.look", "sees nothing")
	d.mustCLI(t, "apply", "-f", other)
	d.waitLog(t, "look", "sees nothing")
	if _, err := os.Stat("/dev/shm/" + mark); err == nil {
		t.Errorf("the host's /dev/shm holds the project's file")
	}
	dir := filepath.Join(d.runDir, "shm", "shm-a")
	if _, err := os.Stat(filepath.Join(dir, mark)); err != nil {
		t.Errorf("the project's /dev/shm is not at %s: %v", dir, err)
	}
	d.mustCLI(t, "down", "-p", "shm-a")
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s is left after the project's down", dir)
	}
	d.mustCLI(t, "down", "-p", "shm-b")
	d.mustCLI(t, "rm", "look")
}

// TestLeaseAcrossDaemonRestart: a client's hold follows the daemon across
// its restart (the project stays, however long past its grace); a client
// gone while no daemon ran has its project taken down by the next daemon,
// once that one is back and its grace is over.
func TestLeaseAcrossDaemonRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := sleeperStack(t, d)
	holder := api.NewClient(d.socket)
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release, err := holder.Hold(ctx, "lr", api.LeaseOptions{Grace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	d.mustCLI(t, "up", "-p", "lr", "-f", file, "--wait")

	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	time.Sleep(4 * time.Second) // twice the grace
	if ws, err := d.client.ListProject(ctx, "lr"); err != nil || len(ws) != 2 {
		t.Fatalf("after a restart with its client alive, project lr has %d workloads (%v); want its 2", len(ws), err)
	}
	if ls, err := d.client.Leases(ctx); err != nil || len(ls) != 1 || !ls[0].Held {
		t.Errorf("leases after the restart: %+v, %v; want lr held again", ls, err)
	}

	d.kill(t)
	release() // the client goes while no daemon runs
	d = startDaemon(t, inDir(d.dir))
	back := time.Now()
	if ws, err := d.client.ListProject(ctx, "lr"); err != nil || len(ws) != 2 {
		t.Errorf("project lr went before the next daemon's grace: %d workloads, %v", len(ws), err)
	}
	assertProjectGone(t, d, "lr", nil)
	if took := time.Since(back); took < 1500*time.Millisecond {
		t.Errorf("taken down %s after the daemon was back; its grace is 2s", took)
	}
}

// TestPrivateTmp: a workload that asks has a /tmp and /var/tmp of each
// run's own: empty at its start, not the host's, gone at its end; a
// container is refused it.
func TestPrivateTmp(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	mark := fmt.Sprintf("flyd-tmp-test-%d", time.Now().UnixNano())
	if err := os.WriteFile("/tmp/"+mark+".host", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove("/tmp/" + mark + ".host")
	file := d.writeSpec(t, "tmp.yaml", fmt.Sprintf(`name: own
user: nobody
private_tmp: true
workdir: /
command: [sh, -c, "ls -A /tmp | wc -l; test -e /tmp/%[1]s.host && echo sees the host; echo x > /tmp/%[1]s; echo y > /var/tmp/%[1]s && echo wrote; exec sleep 600"]
`, mark))
	d.mustCLI(t, "apply", "-f", file, "--wait")
	out := d.waitLog(t, "own", "wrote")
	if !strings.HasPrefix(out, "0\n") || strings.Contains(out, "sees the host") {
		t.Errorf("the run's /tmp was not its own and empty: %q", out)
	}
	for _, p := range []string{"/tmp/" + mark, "/var/tmp/" + mark} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("the run wrote %s on the host", p)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(d.stateDir, "tmp", "own.*", "tmp", mark))
	if len(dirs) != 1 {
		t.Fatalf("the run's own /tmp is not under the state dir: %v", dirs)
	}
	// A daemon killed and started again adopts the run with its /tmp.
	d.kill(t)
	d = startDaemon(t, inDir(d.dir))
	d.waitState(t, "own", api.StateRunning)
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("the adopted run's own /tmp is gone after a daemon restart: %v", err)
	}
	d.mustCLI(t, "stop", "own")
	if _, err := os.Stat(filepath.Dir(filepath.Dir(dirs[0]))); err == nil {
		t.Errorf("the run's own /tmp outlived it")
	}
	d.mustCLI(t, "rm", "own")
	bad := d.writeSpec(t, "ctmp.yaml", "name: c\nkind: containerd\ncontainerd: {image: docker.io/library/busybox:latest}\ncommand: [sleep, \"600\"]\nprivate_tmp: true\n")
	if _, errOut, code := runCLI(t, d.socket, "apply", "-f", bad); code == 0 || !strings.Contains(errOut, "private_tmp: applies to native and nix workloads") {
		t.Errorf("a container with private_tmp: exit %d, %s", code, errOut)
	}
}
