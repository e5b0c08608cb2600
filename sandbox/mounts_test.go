package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// TestStartWithMountsHosts: a child started with a hosts file reads it at
// /etc/hosts, cannot write it, and sees a rewrite in place; the host's
// /etc/hosts is untouched.
func TestStartWithMountsHosts(t *testing.T) {
	testenv.RequireRoot(t, "a mount namespace of its own")
	if _, err := os.Stat("/etc/hosts"); err != nil {
		t.Skip("this host has no /etc/hosts to bind over")
	}
	own, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hosts := filepath.Join(dir, "net")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tdb ci-7.db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo, ready := filepath.Join(dir, "go"), filepath.Join(dir, "ready")
	if err := exec.Command("mkfifo", fifo, ready).Run(); err != nil {
		t.Fatal(err)
	}
	// The child reads the file, tries to write it, says so, waits for the
	// rewrite and reads it again.
	cmd := exec.Command("sh", "-c", `cat /etc/hosts; if echo x >> /etc/hosts; then echo written; else echo refused; fi; echo > "$2"; read line < "$1"; cat /etc/hosts`, "sh", fifo, ready)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartWithMounts(Mounts{Hosts: hosts}, nil, nil, nil, cmd.Start); err != nil {
		t.Fatal(err)
	}
	said := make(chan error, 1)
	go func() { _, err := os.ReadFile(ready); said <- err }()
	select {
	case err := <-said:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child never read its /etc/hosts: %s", out.String())
	}
	f, err := os.OpenFile(hosts, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("127.0.0.1\tcache ci-7.cache\n"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(fifo, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := "127.0.0.1\tdb ci-7.db\nrefused\n127.0.0.1\tcache ci-7.cache\n"
	if got := out.String(); !strings.HasPrefix(got, "127.0.0.1\tdb ci-7.db\n") || !strings.Contains(got, "refused\n") || !strings.HasSuffix(got, "127.0.0.1\tcache ci-7.cache\n") {
		t.Errorf("the child says\n%s\nwant\n%s(and the shell's word on the write)", got, want)
	}
	if now, _ := os.ReadFile("/etc/hosts"); string(now) != string(own) {
		t.Errorf("the host's /etc/hosts changed:\n%s", now)
	}
}

// TestStartWithMountsNetworkUnderABind: a network whose namespace is kept
// under a directory the run's mounts hide (a run dir under /tmp, with a
// private /tmp) is still the one the child joins: its namespace is opened
// before anything is bound.
func TestStartWithMountsNetworkUnderABind(t *testing.T) {
	requireRoot(t)
	dir, err := os.MkdirTemp("/tmp", "flyd-netns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nw, err := newTestNetworksIn(t, dir).Ensure("hidden")
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := MakeTmp(t.TempDir(), "run")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("readlink", "/proc/self/ns/net")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartWithMounts(Mounts{Tmp: tmp}, nw, nil, &syscall.SysProcAttr{}, cmd.Start); err != nil {
		t.Fatalf("a start in network %s, kept under %s, with /tmp bound: %v", nw.Name, dir, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got, want := strings.TrimSpace(out.String()), nsID(t, nw.Path); got != want {
		t.Errorf("the child is in %s, want the network's %s", got, want)
	}
}
