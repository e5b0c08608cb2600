package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// redisDir is a directory for a redis's pid file and data, the
// workload's user's own (0755), under the test's.
func redisDir(t *testing.T, d *daemon, name string) (dir, as string) {
	t.Helper()
	dir = filepath.Join(d.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if u, err := user.Lookup("redis"); err == nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		as = "user: redis"
	}
	return dir, as
}

func ppid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

// TestDaemonizingRedis: `redis-server --daemonize yes` forks, writes its
// pid file and leaves its launcher to exit; flyd follows the forked
// server. Its launcher here is a shell that stays (as pg_ctl can), so
// that killing it shows it is not the run.
func TestDaemonizingRedis(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	server := need(t, "redis-server", "redis-server")
	cli := need(t, "redis-cli", "redis-tools")
	dir, as := redisDir(t, d, "redis")
	pidFile := filepath.Join(dir, "redis.pid")
	launcherFile := filepath.Join(dir, "launcher.pid")
	port := freePort(t)
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "redis.yaml", fmt.Sprintf(`
name: redis
command: [sh, -c, 'echo $$$$ > %s; %s --daemonize yes --pidfile %s --port %d --bind 127.0.0.1 --save "" --appendonly no --dir %s; exec sleep 1000']
%s
forking: {pid_file: %s, timeout: 10s}
endpoints: [{name: redis, port: %d}]
health: {tcp: redis, send: "PING\r\n", expect: "+PONG", interval: 100ms}
restart: {policy: on-failure, backoff: {initial: 100ms}}
`, launcherFile, server, pidFile, port, dir, as, pidFile, port)))
	w := d.waitWorkload(t, "redis", "healthy", healthy(true))
	follows := func(w *api.Workload) {
		t.Helper()
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) != strconv.Itoa(w.PID) {
			t.Fatalf("the workload's pid is %d, its pid file says %s", w.PID, b)
		}
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(w.PID) + "/comm")
		if !strings.HasPrefix(string(comm), "redis-server") {
			t.Fatalf("pid %d is %q, not the forked redis-server", w.PID, comm)
		}
	}
	follows(w)
	// Forked by a launcher that exited: re-parented to the daemon, a
	// child subreaper.
	if got := ppid(t, w.PID); got != d.pid() {
		t.Errorf("the followed redis's parent is %d, want the daemon %d", got, d.pid())
	}
	ping := func() error {
		out, err := exec.Command(cli, "-p", strconv.Itoa(port), "PING").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) != "PONG" {
			err = fmt.Errorf("PING: %q", out)
		}
		return err
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}

	// The launcher is not the run: killing it changes nothing.
	b, err := os.ReadFile(launcherFile)
	if err != nil {
		t.Fatal(err)
	}
	launcher, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if launcher <= 1 || launcher == w.PID {
		t.Fatalf("the launcher's pid file says %q (the run's pid is %d)", b, w.PID)
	}
	if err := syscall.Kill(launcher, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if w2 := d.get(t, "redis"); w2.State != api.StateRunning || w2.PID != w.PID || w2.Restarts != 0 {
		t.Fatalf("after its launcher was killed: %s pid %d restarts %d, want running pid %d", w2.State, w2.PID, w2.Restarts, w.PID)
	}
	if err := ping(); err != nil {
		t.Fatalf("after its launcher was killed: %v", err)
	}

	// The server's own end is the run's, with its real status (it is the
	// daemon's child), and restarted by policy.
	if w.PID <= 1 {
		t.Fatalf("pid %d", w.PID)
	}
	if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w = d.waitWorkload(t, "redis", "restarted and healthy", func(v *api.Workload) bool {
		return v.Restarts == 1 && v.State == api.StateRunning && v.Healthy != nil && *v.Healthy
	})
	if e := w.LastExit; e == nil || e.Unknown || e.Signal != "SIGKILL" {
		t.Errorf("last exit %+v, want killed by SIGKILL", e)
	}
	follows(w)

	// A daemon restart adopts the server, by its pid and start time.
	d.terminate(t)
	if err := ping(); err != nil {
		t.Fatalf("with no daemon: %v", err)
	}
	d = startDaemon(t, inDir(d.dir))
	a := d.waitState(t, "redis", api.StateRunning)
	if a.PID != w.PID {
		t.Fatalf("adopted pid %d, want the followed %d", a.PID, w.PID)
	}

	// flyd stop ends it.
	d.mustCLI(t, "stop", "redis")
	d.waitState(t, "redis", api.StateStopped)
	if alive(w.PID) {
		t.Errorf("redis pid %d outlived flyd stop", w.PID)
	}
	if ping() == nil {
		t.Error("redis still answers after flyd stop")
	}
}

// TestForkingRefusals: a pid file in a directory another user can write
// is refused at start, naming the field and the path; a pid file that
// names a process outside the workload's cgroup is never followed.
func TestForkingRefusals(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	open := filepath.Join(d.dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	// The start fails at once, and apply says why.
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "open.yaml", fmt.Sprintf(`
name: open
command: [sh, -c, 'sleep 1000 & echo $! > %s/d.pid']
forking: {pid_file: %s/d.pid}
`, open, open)))
	want := "forking.pid_file " + open + "/d.pid: directory " + open + " is writable by its group or others"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("apply: exit %d, %s; want 1 and %q", code, errOut, want)
	}
	if w := d.waitState(t, "open", api.StateFailed); !strings.Contains(w.LastError, want) {
		t.Errorf("last error %q, want %q", w.LastError, want)
	}

	own := filepath.Join(d.dir, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	// The launcher names init, and stays: pid 1 is no process of the
	// workload's, so the start fails once the timeout is over.
	_, _, _ = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "stranger.yaml", fmt.Sprintf(`
name: stranger
command: [sh, -c, 'echo 1 > %s/d.pid; exec sleep 1000']
forking: {pid_file: %s/d.pid, timeout: 1s}
`, own, own)))
	want = "names pid 1, which is not a process of the workload's cgroup: not followed"
	w := d.waitWorkload(t, "stranger", "its start failed", func(w *api.Workload) bool { return strings.Contains(w.LastError, want) })
	if w.PID != 0 || w.State == api.StateRunning {
		t.Errorf("a failed start shows %s, pid %d", w.State, w.PID)
	}
}

// TestRedisStopCommand: `stop: {exec: [redis-cli, shutdown]}` stops redis
// by its own command; the signal is not needed, and the stop's event says
// so.
func TestRedisStopCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	server := need(t, "redis-server", "redis-server")
	need(t, "redis-cli", "redis-tools")
	dir, as := redisDir(t, d, "redis")
	port := freePort(t)
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "redis.yaml", fmt.Sprintf(`
name: redis
command: [%q, "--port", "${PORT_REDIS}", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", %q]
%s
endpoints: [{name: redis, port: %d}]
health: {tcp: redis, send: "PING\r\n", expect: "+PONG", interval: 100ms}
stop: {exec: [redis-cli, -p, "${PORT_REDIS}", shutdown, nosave], signal: SIGKILL, timeout: 10s}
`, server, dir, as, port)))
	d.waitWorkload(t, "redis", "healthy", healthy(true))
	begun := time.Now()
	d.mustCLI(t, "stop", "redis")
	took := time.Since(begun)
	w := d.waitState(t, "redis", api.StateStopped)
	ev := d.pastEvent(t, func(e api.Event) bool {
		return e.Workload == "redis" && strings.HasPrefix(e.Message, "stop command redis-cli")
	})
	if !strings.Contains(ev.Message, "exited 0 after") || !strings.HasSuffix(ev.Message, "the run ended, no signal needed") {
		t.Errorf("the stop's event says %q", ev.Message)
	}
	// The stop signal is SIGKILL here: had it been sent, redis would have
	// been killed by it, not exited 0.
	if e := w.LastExit; e == nil || e.Code != 0 || e.Signal != "" {
		t.Errorf("last exit %+v, want exit 0 from redis's own shutdown", e)
	}
	if !strings.Contains(d.logs(t, "redis"), "flyd: stop command redis-cli exited 0") {
		t.Errorf("the workload's log does not tell the stop command")
	}
	t.Logf("flyd stop by redis-cli shutdown took %s; the event: %s", took.Round(time.Millisecond), ev.Message)
}
