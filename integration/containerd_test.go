package integration

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestContainerdWorkload: an image imported from an archive runs as a
// container of an isolated network, with flyd's environment, its output in
// the workload's log, its exec check run inside it; a daemon restart
// adopts it, its check still inside; stop and rm leave no
// container behind.
func TestContainerdWorkload(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: box
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %s}
command: ["sh", "-c", "touch /.made-inside; echo ctx=$CODEFLY__RUNTIME_CONTEXT port=$FLYD_PORT_HTTP; exec sleep 1000"]
endpoints: [{name: http, port: ephemeral}]
network: boxnet
health: {exec: ["sh", "-c", "test -f /.made-inside"], interval: 100ms, timeout: 10s}
`, archive)))
	w := d.waitState(t, "box", api.StateRunning)
	if w.ContainerID == "" {
		t.Fatalf("no container id: %+v", w)
	}
	d.waitLog(t, "box", fmt.Sprintf("ctx=container port=%d", w.Ports[0].Port))
	// Its exec check runs inside the container, as docker exec runs one:
	// the file its command made is in the container's root alone.
	healthy := func(d *daemon) func() error {
		return func() error {
			if w := d.get(t, "box"); w.Healthy == nil || !*w.Healthy {
				return fmt.Errorf("box's check has not passed (last error %q)", w.LastError)
			}
			return nil
		}
	}
	eventually(t, "box healthy by a check inside it", healthy(d))

	d.terminate(t)
	d2 := startDaemon(t, inDir(d.dir), withArgs("--containerd-socket", ctrd.Socket))
	again := d2.waitState(t, "box", api.StateRunning)
	if again.ContainerID != w.ContainerID {
		t.Fatalf("container %s after the restart, want the adopted %s", again.ContainerID, w.ContainerID)
	}
	eventually(t, "the adopted box healthy by a check inside it", healthy(d2))
	d2.mustCLI(t, "rm", "box")
	out, err := exec.Command("ctr", "--address", ctrd.Socket, "-n", "flyd", "containers", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left after rm: %s", out)
	}
}

// TestContainerdDownAtDaemonStart: a daemon that starts while containerd is
// down keeps its container as unknown, neither restarted nor forgotten, and
// adopts it, same container and task, once containerd is back.
func TestContainerdDownAtDaemonStart(t *testing.T) {
	t.Parallel()
	ctrd, ctrdDir, archive := privateContainerd(t)
	sock := withArgs("--containerd-socket", ctrd.Socket)
	d := startDaemon(t, sock)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: box
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %s}
command: ["sh", "-c", "echo up; exec sleep 1000"]
`, archive)))
	w := d.waitState(t, "box", api.StateRunning)
	d.waitLog(t, "box", "up")
	d.terminate(t)
	ctrd.Stop()

	d2 := startDaemon(t, inDir(d.dir), sock)
	u := d2.waitState(t, "box", api.StateUnknown)
	if !strings.Contains(u.Reason, "cannot adopt its run") {
		t.Errorf("unknown because %q", u.Reason)
	}
	if _, errOut, code := runCLI(t, d2.socket, "stop", "box"); code != 1 || !strings.Contains(errOut, "runtime_unavailable") {
		t.Errorf("stop while containerd is down: exit %d, %s; want 1, runtime_unavailable", code, errOut)
	}
	var st api.Status
	decodeJSON(t, d2.mustCLI(t, "status", "--json"), &st)
	if st.Runtimes["containerd"] {
		t.Error("status says containerd is available while it is down")
	}
	if !alive(w.PID) {
		t.Fatalf("the container's process %d died with containerd", w.PID)
	}

	ctrd, err := ctrtest.StartDaemon(ctrdDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrd.Stop)
	a := d2.waitState(t, "box", api.StateRunning)
	if a.ContainerID != w.ContainerID || a.PID != w.PID || a.Restarts != 0 {
		t.Errorf("after containerd came back: container %s pid %d restarts %d; want %s pid %d adopted, no restart",
			a.ContainerID, a.PID, a.Restarts, w.ContainerID, w.PID)
	}
	if n := strings.Count(d2.logs(t, "box"), "up\n"); n != 1 {
		t.Errorf("%d runs in the log, want 1", n)
	}
	d2.mustCLI(t, "rm", "box")
	out, err := exec.Command("ctr", "--address", ctrd.Socket, "-n", "flyd", "containers", "ls", "-q").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left after rm (%v): %s", err, out)
	}
}

// TestContainerdConnected: a container of an isolated network gets the
// network's link like any workload: it reaches a host outside through the
// host, and its server, bound to 127.0.0.1 inside, is reached from the
// host at its published port.
func TestContainerdConnected(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	out := makeOutside(t, 202)
	outAddr := out.serve(t, 18082)
	hostPort := freePort(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: box-out
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %[1]s}
command: ["sh", "-c", "wget -q -O - http://%[2]s/ && echo reached; exec sleep 1000"]
network: boxnet2
---
name: box-web
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %[1]s}
command: ["httpd", "-f", "-v", "-p", "127.0.0.1:${PORT_HTTP}"]
endpoints: [{name: http, port: ephemeral, publish: %[3]d}]
network: boxnet2
`, archive, outAddr, hostPort)))
	d.waitLog(t, "box-out", "reached")
	if !strings.Contains(d.logs(t, "box-out"), "hello from testprog") {
		t.Errorf("the container's way out: %s", d.logs(t, "box-out"))
	}
	d.waitState(t, "box-web", api.StateRunning)
	eventually(t, "the container's server at its published port", func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(hostPort), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprint(c, "GET / HTTP/1.0\r\n\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.") {
			return fmt.Errorf("answer %q: %v", line, err)
		}
		return nil
	})
	d.mustCLI(t, "rm", "--all")
}

// privateContainerd starts a containerd of the test's own, in dir, with a
// busybox image archive beside it, stopped when the test ends.
func privateContainerd(t *testing.T) (ctrd *ctrtest.Daemon, dir, archive string) {
	t.Helper()
	requireRoot(t)
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Skip(t, bin+" is not installed (Debian packages containerd, runc)")
		}
	}
	base := t.TempDir()
	dir = filepath.Join(base, "containerd")
	ctrd, err := ctrtest.StartDaemon(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrd.Stop)
	archive = filepath.Join(base, "bbox.tar")
	if err := ctrtest.BusyboxArchive(archive, "docker.io/library/bbox:latest"); err != nil {
		t.Fatal(err)
	}
	return ctrd, dir, archive
}
