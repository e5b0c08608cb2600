package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
)

// logOnDisk is what a workload's log takes on disk: every file of it,
// generations and index included, in allocated blocks.
func logOnDisk(t *testing.T, d *daemon, name string) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(d.stateDir, "logs", name+".log*"))
	total := int64(0)
	for _, f := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err == nil {
			total += max(st.Blocks*512, st.Size)
		}
	}
	return total
}

// TestLogBoundAgainstHostileWriters runs workloads that do all a writer
// of its own log file could to fill the disk (seek far, ftruncate and
// fallocate their stdout, clear O_APPEND), a `yes`, and a 200 MB line:
// at every look, each log takes no more than --log-max-size ×
// (--log-generations + 1) and the stated slack.
func TestLogBoundAgainstHostileWriters(t *testing.T) {
	t.Parallel()
	const maxSize, gens = 1 << 20, 3
	d := startDaemon(t, withArgs("--log-max-size", "1Mi", "--log-generations", strconv.Itoa(gens)))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "hostile.yaml", `
name: hostile
command: ["@PROG@", hostile]
---
name: yes
command: [/usr/bin/yes, "a line of yes"]
---
name: longline
command: ["@PROG@", longline, "200"]
restart: {policy: never}
`))
	// The index's header, a block of each of its five files, and the
	// index's new copy while a rotation rewrites it.
	const slack = 16 + 5*4096 + 64<<10
	bound := int64(maxSize*(gens+1) + slack)
	worst := map[string]int64{}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for _, name := range []string{"hostile", "yes", "longline"} {
			n := logOnDisk(t, d, name)
			worst[name] = max(worst[name], n)
			if n > bound {
				t.Errorf("the log of %s takes %d bytes on disk, over %d", name, n, bound)
			}
		}
	}
	t.Logf("the most each log took on disk: %v (bound %d)", worst, bound)
	for _, name := range []string{"hostile", "yes"} {
		if w := d.get(t, name); w.State != api.StateRunning || w.Restarts != 0 {
			t.Errorf("%s: %s with %d restarts, want running still", name, w.State, w.Restarts)
		}
		if worst[name] < maxSize*gens {
			t.Errorf("%s's log reached only %d bytes: it was not flooded", name, worst[name])
		}
	}
	// The 200 MB line went through whole: its last part and its end are
	// in the live file or the newest generation.
	d.waitLog(t, "longline", "xxxxxxxx\n")
	d.mustCLI(t, "stop", "hostile", "yes")
}

// TestLogsOfAUserWorkload: a workload running as a user opens
// /dev/stdout and /dev/stderr, its pipe's: nginx as www-data with
// access_log /dev/stdout serves and its access lines are in its log.
func TestLogsOfAUserWorkload(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "shell.yaml", `
name: shell
user: nobody
command: [/bin/sh, -c, "echo to-stderr > /dev/stderr && echo to-stdout > /dev/stdout && exec sleep 1000"]
`))
	d.waitLog(t, "shell", "to-stderr\n")
	d.waitLog(t, "shell", "to-stdout\n")
	// The workload holds its pipe's write end, never a read end.
	pid := d.get(t, "shell").PID
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if !strings.HasPrefix(target, "pipe:") {
			continue
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		for _, l := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(l, "flags:\t"); ok {
				if flags, _ := strconv.ParseInt(v, 8, 64); flags&3 != 1 {
					t.Errorf("the workload's fd %s is %s with flags %s: not write-only", fd.Name(), target, v)
				}
			}
		}
	}

	nginx := need(t, "nginx", "nginx-light")
	port := freePort(t)
	dir := filepath.Join(d.dir, "nginx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 33, 33); err != nil { // www-data
		t.Fatal(err)
	}
	conf := filepath.Join(d.dir, "nginx.conf")
	text := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr;
worker_processes 2;
events {}
http {
	access_log /dev/stdout;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:%[2]d;
		location / { return 200 "served\n"; }
	}
}
`, dir, port)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "nginx.yaml", fmt.Sprintf(`
name: nginx
user: www-data
command: [%q, "-c", %q, "-e", "stderr", "-g", "daemon off;"]
endpoints: [{name: http, port: %d}]
health: {tcp: http, interval: 100ms}
stop: {signal: SIGQUIT, mode: main}
`, nginx, conf, port)))
	probe := fmt.Sprintf("/probe-%d", time.Now().UnixNano())
	eventually(t, "nginx serving", func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, probe))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	d.waitLog(t, "nginx", "GET "+probe)
	if w := d.get(t, "nginx"); w.Restarts != 0 {
		t.Errorf("nginx restarted %d times", w.Restarts)
	}
	d.mustCLI(t, "stop", "nginx", "shell")
}

// TestLogsSurviveDaemonKill kills the daemon with SIGKILL while a
// workload writes 10,000 numbered lines a second, and starts another:
// the workload is adopted, never restarted, and its log holds every
// line once, in order.
func TestLogsSurviveDaemonKill(t *testing.T) {
	t.Parallel()
	d1 := startDaemon(t, withArgs("--log-max-size", "64Mi"))
	d1.mustCLI(t, "apply", "-f", d1.writeSpec(t, "numbered.yaml", "name: numbered\ncommand: [\"@PROG@\", numbered, \"10000\"]\n"))
	w := d1.waitState(t, "numbered", api.StateRunning)
	time.Sleep(1500 * time.Millisecond)
	d1.kill(t)
	time.Sleep(2 * time.Second) // the workload writes on, into its pipe
	d2 := startDaemon(t, inDir(d1.dir), withArgs("--log-max-size", "64Mi"))
	if a := d2.waitState(t, "numbered", api.StateRunning); a.PID != w.PID || a.Restarts != 0 {
		t.Fatalf("after the kill: pid %d, %d restarts; want pid %d adopted", a.PID, a.Restarts, w.PID)
	}
	time.Sleep(1500 * time.Millisecond)
	d2.mustCLI(t, "stop", "numbered")
	lines := strings.Split(strings.TrimSuffix(d2.logs(t, "numbered"), "\n"), "\n")
	for i, l := range lines {
		if l != fmt.Sprintf("n %d", i+1) {
			t.Fatalf("line %d of %d is %q, want %q", i+1, len(lines), l, fmt.Sprintf("n %d", i+1))
		}
	}
	if len(lines) < 30000 {
		t.Fatalf("%d lines in 5 s at 10,000 a second", len(lines))
	}
	t.Logf("%d lines, each once, in order", len(lines))
}

// TestRunOfADaemonWithoutPipesAdopted: a run that writes its log file
// itself (started by a daemon without a log holder, as one from before
// pipes was) is adopted as it is, and its log still rotated; its next run
// writes to a pipe, into the same log.
func TestRunOfADaemonWithoutPipesAdopted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Not a socket where the holder's goes: the daemon has no holder.
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(dir, "run", "logs.sock")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d1 := startDaemon(t, inDir(dir), withArgs("--log-max-size", "16Ki"))
	d1.mustCLI(t, "apply", "-f", d1.writeSpec(t, "counter.yaml", "name: counter\ncommand: [\"@PROG@\", count]\n"))
	w := d1.waitState(t, "counter", api.StateRunning)
	live := filepath.Join(d1.stateDir, "logs", "counter.log")
	if fi, err := os.Lstat(fmt.Sprintf("/proc/%d/fd/1", w.PID)); err != nil {
		t.Fatal(err)
	} else if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", w.PID)); target != live {
		t.Fatalf("without a holder the run writes to %s (%v), want its log file", target, fi.Mode())
	}
	d1.terminate(t)
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}

	d2 := startDaemon(t, inDir(dir), withArgs("--log-max-size", "16Ki"))
	if a := d2.waitState(t, "counter", api.StateRunning); a.PID != w.PID {
		t.Fatalf("pid %d after the restart, want %d adopted", a.PID, w.PID)
	}
	eventually(t, "the adopted run's log rotated", func() error {
		_, err := os.Stat(live + ".2")
		return err
	})
	d2.mustCLI(t, "restart", "counter")
	n := d2.waitState(t, "counter", api.StateRunning)
	target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", n.PID))
	if !strings.HasPrefix(target, "pipe:") {
		t.Fatalf("the next run writes to %s, want a pipe", target)
	}
	// Its lines come through the pipe, into the same log.
	eventually(t, "the new run's lines in the log", func() error {
		last := strings.TrimSpace(d2.mustCLI(t, "logs", "--tail", "1", "counter"))
		if !strings.HasPrefix(last, "count ") {
			return fmt.Errorf("last line %q", last)
		}
		if fi, err := os.Stat(live); err != nil || fi.Size() > 16<<10 {
			return fmt.Errorf("live file: %v, %v bytes", err, fi)
		}
		return nil
	})
	d2.mustCLI(t, "stop", "counter")
}
