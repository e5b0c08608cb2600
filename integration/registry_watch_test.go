package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/internal/etcdtest"
	"github.com/flyd-dev/flyd/registryclient"
)

// lsWatch is a `flyd registry ls -w --json` process and the changes it
// printed.
type lsWatch struct {
	changes chan registryclient.Change
}

func startLsWatch(t *testing.T, bin, url, keyFile string) *lsWatch {
	t.Helper()
	cmd := exec.Command(bin, "registry", "ls", "-w", "--json", "--registry", url, "--registry-key-file", keyFile)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &lsWatch{changes: make(chan registryclient.Change, 100)}
	go func() {
		defer close(w.changes)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var c registryclient.Change
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Errorf("ls -w printed %q: %v", sc.Text(), err)
				continue
			}
			w.changes <- c
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return w
}

// expect reads the next change and checks its type and id.
func (w *lsWatch) expect(t *testing.T, typ, id string) registryclient.Change {
	t.Helper()
	select {
	case c, ok := <-w.changes:
		if !ok {
			t.Fatal("ls -w ended")
		}
		if c.Type != typ || c.Instance.ID != id {
			t.Fatalf("ls -w printed %s %q at %d; want %s %q", c.Type, c.Instance.ID, c.Rev, typ, id)
		}
		return c
	case <-time.After(waitFor):
		t.Fatalf("ls -w printed nothing within %s; want %s %q", waitFor, typ, id)
	}
	return registryclient.Change{}
}

// quiet checks that nothing more was printed (a relist, a change told
// twice).
func (w *lsWatch) quiet(t *testing.T) {
	t.Helper()
	select {
	case c := <-w.changes:
		t.Fatalf("ls -w printed %s %q at %d; want nothing more", c.Type, c.Instance.ID, c.Rev)
	case <-time.After(500 * time.Millisecond):
	}
}

func watchInstance(id string) registryclient.Instance {
	return registryclient.Instance{ID: id, Name: "web", Address: "10.0.0.7", Port: 8080, Healthy: true}
}

// mustRegister registers id, retrying while the registry comes up.
func mustRegister(t *testing.T, url, keyFile, id string) {
	t.Helper()
	rc, err := registryclient.New(url, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	eventually(t, "registering "+id, func() error {
		_, _, err := rc.Register(context.Background(), watchInstance(id))
		return err
	})
}

func mustDeregister(t *testing.T, url, keyFile, id string) {
	t.Helper()
	rc, err := registryclient.New(url, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Deregister(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryWatchResumesAcrossRestart: `flyd registry ls -w` follows a
// real `flyd registry serve`; the registry stops (SIGTERM on its memory
// store's snapshot, SIGKILL on etcd) and starts again on the same state
// and address, and the watch resumes where it was: each change after the
// restart printed once, with no listing again.
func TestRegistryWatchResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	bin := confBinary(t)
	for _, store := range []string{"memory", "etcd"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			keyFile := filepath.Join(dir, "registry.key")
			port := strconv.Itoa(freePort(t))
			args := []string{"--listen", "127.0.0.1:" + port, "--key-file", keyFile}
			if store == "memory" {
				args = append(args, "--snapshot", filepath.Join(dir, "registry.json"))
			} else {
				cluster := etcdtest.New(t, 1)
				args = append(args, "--store", "etcd", "--etcd-endpoints", strings.Join(cluster.Endpoints(), ","),
					"--etcd-prefix", "/flyd-test/"+filepath.Base(dir)+"/")
			}
			reg := startConfRegistry(t, bin, dir, args...)
			url := reg.url
			mustRegister(t, url, keyFile, "a")
			w := startLsWatch(t, bin, url, keyFile)
			w.expect(t, registryclient.ChangePut, "a")
			w.expect(t, registryclient.ChangeSynced, "")
			mustRegister(t, url, keyFile, "b")
			w.expect(t, registryclient.ChangePut, "b")

			if store == "memory" {
				reg.terminate(t)
			} else {
				_ = reg.cmd.Process.Kill()
				<-reg.done
			}
			startConfRegistry(t, bin, dir, args...)
			mustRegister(t, url, keyFile, "c")
			mustDeregister(t, url, keyFile, "a")
			w.expect(t, registryclient.ChangePut, "c")
			w.expect(t, registryclient.ChangeDelete, "a")
			w.quiet(t)
		})
	}
}
