package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestContainerdVolumes: a host path bind-mounted is read, and refused a
// write when read-only; a named volume keeps its file across a replace
// and a plain down, is its project's own (a second project's of the same
// name starts empty), and goes with `down --volumes`, the host path
// staying.
func TestContainerdVolumes(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "greeting"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stack := func(round int) string {
		return d.writeSpec(t, "stack.yaml", fmt.Sprintf(`
name: app
kind: containerd
stop: {timeout: 1s}
containerd:
  image: "docker.io/library/bbox:latest"
  archive: %s
  volumes: ["%s:/src:ro", "data:/data"]
user: app
env: {ROUND: "%d"}
command: ["sh", "-c", "cat /src/greeting; touch /src/new || echo write refused; if [ -f /data/stamp ]; then echo found $(cat /data/stamp) in round $ROUND; else echo $ROUND > /data/stamp && echo fresh in round $ROUND; fi; exec sleep 1000"]
network: net
`, archive, host, round))
	}
	vol := func(name string) string { return filepath.Join(d.stateDir, "volumes", name) }

	d.mustCLI(t, "up", "-p", "va", "-f", stack(1), "--wait")
	log := d.waitLog(t, "va.app", "fresh in round 1")
	for _, want := range []string{"hello from the host", "Read-only file system", "write refused"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err == nil {
		t.Error("a write through a read-only mount reached the host")
	}
	if fi, err := os.Stat(vol("va.data")); err != nil || fi.Sys() == nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the project's volume: %v", err)
	}

	// A replace keeps the volume.
	d.mustCLI(t, "up", "-p", "va", "-f", stack(2), "--wait")
	d.waitLog(t, "va.app", "found 1 in round 2")

	// Another project's volume of that name is its own.
	d.mustCLI(t, "up", "-p", "vb", "-f", stack(3), "--wait")
	d.waitLog(t, "vb.app", "fresh in round 3")

	// A plain down keeps it; the project's next up finds it.
	if out := d.mustCLI(t, "down", "-p", "va"); strings.Contains(out, "volume") {
		t.Errorf("a plain down says %q", out)
	}
	if _, err := os.Stat(filepath.Join(vol("va.data"), "stamp")); err != nil {
		t.Fatalf("a plain down removed the volume: %v", err)
	}
	d.mustCLI(t, "up", "-p", "va", "-f", stack(4), "--wait")
	d.waitLog(t, "va.app", "found 1 in round 4")

	// down --volumes takes it, once the workload is gone; vb's stays.
	out := d.mustCLI(t, "down", "-p", "va", "--volumes")
	if !strings.Contains(out, "volume va.data removed") {
		t.Errorf("down --volumes says %q", out)
	}
	if _, err := os.Stat(vol("va.data")); !os.IsNotExist(err) {
		t.Errorf("va.data after down --volumes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vol("vb.data"), "stamp")); err != nil {
		t.Errorf("vb's volume after va's down: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "greeting")); err != nil || len(b) == 0 {
		t.Errorf("the bind-mounted host path after down --volumes: %v", err)
	}

	// Down first, volumes later: a project left with volumes alone.
	d.mustCLI(t, "down", "-p", "vb")
	if out := d.mustCLI(t, "down", "-p", "vb", "--volumes"); !strings.Contains(out, "volume vb.data removed") {
		t.Errorf("down --volumes of a project with volumes alone says %q", out)
	}
	if _, errOut, code := runCLI(t, d.socket, "down", "-p", "vb", "--volumes"); code != 1 || !strings.Contains(errOut, `no project named "vb"`) {
		t.Errorf("down --volumes of nothing: exit %d, %s", code, errOut)
	}
	if es, _ := os.ReadDir(filepath.Join(d.stateDir, "volumes")); len(es) != 0 {
		t.Errorf("volumes left: %v", es)
	}
}

// TestContainerdVolumeErrors: a host path that does not exist fails the
// workload naming the entry; a bad entry is refused at apply.
func TestContainerdVolumeErrors(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	const missing = "containerd.volumes[0]: the host path /no/such/dir: no such file or directory"
	// apply waits for the start while it comes soon enough; either way
	// the workload fails, saying why.
	_, errOut, code := runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: nohost
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %s, volumes: ["/no/such/dir:/x"]}
command: ["true"]
`, archive)))
	if code != 0 && !strings.Contains(errOut, missing) {
		t.Errorf("apply of a missing host path: exit %d, %s", code, errOut)
	}
	if w := d.waitState(t, "nohost", api.StateFailed); !strings.Contains(w.LastError, missing) {
		t.Errorf("last error %q", w.LastError)
	}
	_, errOut, code = runCLI(t, d.socket, "apply", "-f", d.writeSpec(t, "bad.yaml", fmt.Sprintf(`
name: bad
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %s, volumes: ["./src:/src", "Data:/d", "x:/y:z"]}
`, archive)))
	for _, want := range []string{`containerd.volumes[0]: the host path "./src" must be absolute`,
		`containerd.volumes[1]: the volume name "Data" must be`, `containerd.volumes[2]: the mode "z" must be ro or rw`} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("bad volumes: exit %d, %s; want %s", code, errOut, want)
		}
	}
}

// TestContainerdHostDockerInternal: a container reaches the host at
// host.docker.internal: the host side of its network's link, or
// 127.0.0.1 on the host's network.
func TestContainerdHostDockerInternal(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	hl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go func() {
		_ = http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the host answers") }))
	}()
	port := strconv.Itoa(hl.Addr().(*net.TCPAddr).Port)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	script := `cat /etc/hosts; wget -q -O - http://host.docker.internal:` + port + `/; exec sleep 1000`
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: isolated
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %[1]s}
command: ["sh", "-c", %[2]q]
network: hdi
---
name: onhost
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %[1]s}
command: ["sh", "-c", %[2]q]
`, archive, script)))
	gw := d.gateways(t)["hdi"]
	if gw == "" {
		t.Fatalf("network hdi has no gateway: %v", d.gateways(t))
	}
	log := d.waitLog(t, "isolated", "the host answers")
	if !strings.Contains(log, gw+"\thost.docker.internal\n") {
		t.Errorf("the isolated container's /etc/hosts does not name the gateway %s:\n%s", gw, log)
	}
	log = d.waitLog(t, "onhost", "the host answers")
	if !strings.Contains(log, "127.0.0.1\thost.docker.internal\n") {
		t.Errorf("the host network's container:\n%s", log)
	}
	d.mustCLI(t, "rm", "--all")
}

// TestContainerdVolumesPeers: a caller other than root (--peer-users) is
// refused a host path, one it cannot read or its own, and root's volumes.
func TestContainerdVolumesPeers(t *testing.T) {
	t.Parallel()
	ctrd, _, archive := privateContainerd(t)
	gid := usersGroup(t)
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket, "--socket-group", "users", "--peer-users", "nobody"))
	member := func(args ...string) (string, string, int) {
		return runAs(t, d.socket, 65534, 65534, []uint32{uint32(gid)}, args...)
	}
	secret := t.TempDir() // root's, 0700
	own := filepath.Join(d.dir, "nobodys")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{secret, own} {
		_, errOut, code := member("apply", "-f", d.writeSpec(t, "p.yaml", fmt.Sprintf(`
name: peek
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %s, volumes: ["%s:/x:ro"]}
command: ["cat", "/x/a"]
user: nobody
`, archive, src)))
		if code != 1 || !strings.Contains(errOut, "(forbidden)") || !strings.Contains(errOut, "containerd.volumes[0]") || !strings.Contains(errOut, "mounts no host path") {
			t.Errorf("a peer mounting %s: exit %d, %s; want forbidden", src, code, errOut)
		}
	}
	// Root's volumes are root's: a peer's down --volumes removes none.
	d.mustCLI(t, "up", "-p", "rv", "-f", d.writeSpec(t, "r.yaml", fmt.Sprintf(`
name: db
kind: containerd
stop: {timeout: 1s}
containerd: {image: "docker.io/library/bbox:latest", archive: %s, volumes: ["data:/data"]}
command: ["sh", "-c", "echo x > /data/x; exec sleep 1000"]
`, archive)), "--wait")
	d.mustCLI(t, "down", "-p", "rv")
	if _, errOut, code := member("down", "-p", "rv", "--volumes"); code != 1 || !strings.Contains(errOut, "volumes rv.data are root's") {
		t.Errorf("a peer's down --volumes of root's: exit %d, %s; want forbidden", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(d.stateDir, "volumes", "rv.data", "x")); err != nil {
		t.Errorf("root's volume after a peer's down --volumes: %v", err)
	}
	d.mustCLI(t, "down", "-p", "rv", "--volumes")
}
