package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestContainerdWorkload: an image imported from an archive runs as a
// container of an isolated network, with flyd's environment, its output in
// the workload's log; a daemon restart adopts it; stop and rm leave no
// container behind.
func TestContainerdWorkload(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Skip(t, bin+" is not installed (Debian packages containerd, runc)")
		}
	}
	dir := t.TempDir()
	ctrd, err := ctrtest.StartDaemon(filepath.Join(dir, "containerd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrd.Stop)
	archive := filepath.Join(dir, "bbox.tar")
	if err := ctrtest.BusyboxArchive(archive, "docker.io/library/bbox:latest"); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, withArgs("--containerd-socket", ctrd.Socket))
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "c.yaml", fmt.Sprintf(`
name: box
kind: containerd
containerd: {image: "docker.io/library/bbox:latest", archive: %s}
command: ["sh", "-c", "echo ctx=$CODEFLY__RUNTIME_CONTEXT port=$FLYD_PORT_HTTP; exec sleep 1000"]
endpoints: [{name: http, port: ephemeral}]
network: boxnet
`, archive)))
	w := d.waitState(t, "box", api.StateRunning)
	if w.ContainerID == "" {
		t.Fatalf("no container id: %+v", w)
	}
	d.waitLog(t, "box", fmt.Sprintf("ctx=container port=%d", w.Ports[0].Port))

	d.terminate(t)
	d2 := startDaemon(t, inDir(d.dir), withArgs("--containerd-socket", ctrd.Socket))
	again := d2.waitState(t, "box", api.StateRunning)
	if again.ContainerID != w.ContainerID {
		t.Fatalf("container %s after the restart, want the adopted %s", again.ContainerID, w.ContainerID)
	}
	d2.mustCLI(t, "rm", "box")
	out, err := exec.Command("ctr", "--address", ctrd.Socket, "-n", "flyd", "containers", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left after rm: %s", out)
	}
}
