package containerd

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/sandbox"
)

// runToEnd starts tk and waits for it to end, returning its log.
func runToEnd(t *testing.T, d *Driver, tk *driver.Task) (driver.Exit, string) {
	t.Helper()
	p, err := d.Start(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	e := waitDone(t, p)
	b, _ := os.ReadFile(tk.Log.Name())
	return e, string(b)
}

// TestVolumes: a bind mount is read, refused writes when read-only, and
// left on the host; a named volume of a project is made on first use for
// the image's user, keeps its files from run to run, is kept while a
// container mounts it and removed by RemoveVolumes.
func TestVolumes(t *testing.T) {
	d := setup(t)
	d.VolumesDir = filepath.Join(t.TempDir(), "volumes")
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "greeting"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tk := task(t, "ci-1.app", "sh", "-c", "cat /src/greeting; echo x > /src/new || echo refused; echo kept > /data/file; id -u; stat -c '%u:%g %a' /data")
	tk.Spec.User = "app"
	tk.Spec.Containerd.Volumes = []string{host + ":/src:ro", "data:/data"}
	e, log := runToEnd(t, d, tk)
	if !e.Success() {
		t.Fatalf("exit %v: %s", e, log)
	}
	for _, want := range []string{"hello from the host\n", "Read-only file system", "refused\n", "1000\n", "1000:1000 755\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err == nil {
		t.Error("a write through a read-only mount reached the host")
	}
	vol := filepath.Join(d.VolumesDir, "ci-1.data")
	if b, err := os.ReadFile(filepath.Join(vol, "file")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the volume's file on the host: %q, %v", b, err)
	}
	if fi, err := os.Stat(d.VolumesDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volumes directory: %v, %v; want 0700", fi.Mode(), err)
	}

	// The next run finds the file; a read-write bind mount writes the host.
	tk2 := task(t, "ci-1.app", "sh", "-c", "cat /data/file; echo written > /src/new")
	tk2.Spec.Containerd.Volumes = []string{host + ":/src", "data:/data:ro"}
	if e, log := runToEnd(t, d, tk2); !e.Success() || !strings.Contains(log, "kept\n") {
		t.Fatalf("second run: exit %v: %s", e, log)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "new")); string(b) != "written\n" {
		t.Errorf("a read-write bind mount: host file %q", b)
	}

	// Another project's volume of the same name is its own; the default
	// project's keeps its bare name.
	other := task(t, "ci-2.app", "sh", "-c", "ls /data | wc -l")
	other.Spec.Containerd.Volumes = []string{"data:/data"}
	if e, log := runToEnd(t, d, other); !e.Success() || strings.TrimSpace(log) != "0" {
		t.Errorf("another project's volume: exit %v, %q entries; want an empty one", e, log)
	}
	plain := task(t, "app", "true")
	plain.Spec.Containerd.Volumes = []string{"data:/data"}
	runToEnd(t, d, plain)
	if names := dirNames(t, d.VolumesDir); !slices.Equal(names, []string{"ci-1.data", "ci-2.data", "data"}) {
		t.Errorf("volumes %q", names)
	}

	// Kept while a container mounts it, whatever its state.
	hold := task(t, "ci-1.app", "sleep", "100")
	hold.Spec.Containerd.Volumes = []string{"data:/data"}
	p, err := d.Start(context.Background(), hold)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := d.RemoveVolumes(context.Background(), "ci-1")
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "volume ci-1.data is kept: container ci-1.app-") || len(removed) != 0 {
		t.Errorf("removing a mounted volume: %q, %v", removed, err)
	}
	if _, err := os.Stat(vol); err != nil {
		t.Fatalf("a mounted volume was removed: %v", err)
	}
	_ = p.Kill()
	waitDone(t, p)

	removed, err = d.RemoveVolumes(context.Background(), "ci-1")
	if err != nil || !slices.Equal(removed, []string{"ci-1.data"}) {
		t.Fatalf("RemoveVolumes(ci-1) = %q, %v", removed, err)
	}
	if names := dirNames(t, d.VolumesDir); !slices.Equal(names, []string{"ci-2.data", "data"}) {
		t.Errorf("after removing ci-1's: %q", names)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "greeting")); len(b) == 0 {
		t.Error("the bind-mounted host path was touched")
	}
	if removed, err := d.RemoveVolumes(context.Background(), "ci-9"); err != nil || len(removed) != 0 {
		t.Errorf("a project without volumes: %q, %v", removed, err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

// TestVolumeErrors: a host path that does not exist, a named volume on a
// driver without a volumes directory, and a volume's path taken by a
// file are each refused, naming the entry, and leave nothing behind.
func TestVolumeErrors(t *testing.T) {
	d := setup(t)
	ctx := context.Background()
	tk := task(t, "bad", "true")
	tk.Spec.Containerd.Volumes = []string{"/no/such/dir:/x"}
	_, err := d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "containerd.volumes[0]: the host path /no/such/dir: no such file") {
		t.Errorf("a missing host path: %v", err)
	}
	tk.Spec.Containerd.Volumes = []string{"/:/host:ro", "data:/data"}
	_, err = d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "containerd.volumes[1]: this runtime keeps no named volumes") {
		t.Errorf("no volumes directory: %v", err)
	}
	d.VolumesDir = t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(d.VolumesDir, "data")); err != nil {
		t.Fatal(err)
	}
	_, err = d.Start(ctx, tk)
	if !errors.Is(err, driver.ErrExec) || !strings.Contains(err.Error(), "volume data: "+filepath.Join(d.VolumesDir, "data")+" is not a directory") {
		t.Errorf("a volume that is a link: %v", err)
	}
	if l := leftovers(t, d); len(l) > 0 {
		t.Fatalf("left behind: %v", l)
	}
}

// TestHosts: /etc/hosts names the host host.docker.internal: the host
// side of an isolated network's link, 127.0.0.1 on the host's network
// (after the host's own entries), nothing on an island.
func TestHosts(t *testing.T) {
	d := setup(t)
	tk := task(t, "hosts", "cat", "/etc/hosts")
	_, log := runToEnd(t, d, tk)
	own, _ := os.ReadFile("/etc/hosts")
	if !strings.HasPrefix(log, string(own)) || !strings.HasSuffix(log, "127.0.0.1\thost.docker.internal\n") {
		t.Errorf("on the host's network:\n%s", log)
	}

	nets, err := sandbox.NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nw, err := nets.Ensure("h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nets.Delete("h") })
	tk = task(t, "hosts", "sh", "-c", "cat /etc/hosts; ls -l /etc/hosts")
	tk.Network = nw
	_, log = runToEnd(t, d, tk)
	if strings.Contains(log, "host.docker.internal") || !strings.Contains(log, "127.0.0.1\tlocalhost\n") {
		t.Errorf("on an island:\n%s", log)
	}
	if !strings.Contains(log, "-rw-r--r--") {
		t.Errorf("/etc/hosts is not 0644:\n%s", log)
	}

	nw.Link = &sandbox.Link{Host: netip.MustParseAddr("10.201.0.1"), Inner: netip.MustParseAddr("10.201.0.2")}
	tk = task(t, "hosts", "cat", "/etc/hosts")
	tk.Network = nw
	_, log = runToEnd(t, d, tk)
	if !strings.Contains(log, "\n10.201.0.1\thost.docker.internal\n") {
		t.Errorf("on a linked network:\n%s", log)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
