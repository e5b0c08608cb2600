package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api"
)

// TestWorkloadsDirectory: a file dropped in --workloads-dir runs, an edit
// replaces it, a bad file changes nothing and is reported, the API may not
// change a file's workload, and removing the file removes the workload.
func TestWorkloadsDirectory(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := filepath.Join(d.dir, "workloads.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(text, "@PROG@", d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
		// An editor's save: write aside, rename over.
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", "name: web\ncommand: [\"@PROG@\", \"print\", \"1\"]\n")
	first := d.waitState(t, "web", api.StateRunning)
	if first.Owner != "web.yaml" {
		t.Fatalf("owner %q, want web.yaml", first.Owner)
	}

	write("web.yaml", "name: web\ncommand: [\"@PROG@\", \"print\", \"2\"]\n")
	d.waitWorkload(t, "web", "replaced by the edit", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.PID != first.PID
	})
	second := d.get(t, "web")

	write("web.yaml", "name: web\ncommand: [\"@PROG@\", \"print\", \"3\"]\nrestart: {polcy: always}\n")
	eventually(t, "the bad file reported", func() error {
		st, err := d.client.Status(t.Context())
		if err != nil {
			return err
		}
		if len(st.FileProblems) != 1 || !strings.Contains(st.FileProblems[0].Error, "restart.polcy") {
			return fmt.Errorf("file problems %+v", st.FileProblems)
		}
		return nil
	})
	if now := d.get(t, "web"); now.PID != second.PID || now.State != api.StateRunning {
		t.Fatalf("a bad file changed the workload: %+v", now)
	}
	if _, errOut, code := runCLI(t, d.socket, "rm", "web"); code != 1 || !strings.Contains(errOut, "conflict") {
		t.Fatalf("the API removed a file's workload: exit %d, %s", code, errOut)
	}

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the workload removed with its file", func() error {
		if _, err := d.client.Get(t.Context(), "web"); err == nil {
			return fmt.Errorf("web still exists")
		}
		return nil
	})
}

// TestWorkloadsDirectoryOrder: files that name each other in `after`
// converge in one reconcile, whatever the order of their names: api.yaml
// waits for postgres.yaml's workload instead of being refused until the
// next resync.
func TestWorkloadsDirectoryOrder(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// Written aside and renamed into place whole, over the empty directory
	// the daemon made: the watcher sees all three files in one reconcile
	// however slow this machine is, which is what the test is about.
	staging := filepath.Join(d.dir, "staging")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"api.yaml":      "name: api\ncommand: [\"@PROG@\", \"signals\"]\nafter: [postgres, cache]\n",
		"cache.yaml":    "name: cache\ncommand: [\"@PROG@\", \"signals\"]\nafter: [postgres]\n",
		"postgres.yaml": "name: postgres\ncommand: [\"@PROG@\", \"signals\"]\n",
	} {
		if err := os.WriteFile(filepath.Join(staging, name), []byte(strings.ReplaceAll(text, "@PROG@", d.prog)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Rename(staging, filepath.Join(d.dir, "workloads.d")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"postgres", "cache", "api"} {
		d.waitState(t, n, api.StateRunning)
	}
	st, err := d.client.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.FileProblems) != 0 {
		t.Errorf("file problems while converging: %+v", st.FileProblems)
	}
	if strings.Contains(d.log(), "names no workload") {
		t.Error("a dependent was applied before what it names")
	}
}

// TestWorkloadsDirectoryDocuments: a file of the workloads directory takes
// every document kind `flyd apply` takes: its network and policy documents
// are in force before its workloads run, belong to the file (the API may
// not change them), and go with it, across a daemon restart too.
func TestWorkloadsDirectoryDocuments(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	file := filepath.Join(d.dir, "workloads.d", "stack.yaml")
	text := "kind: network\nname: ci-doc\negress: false\n---\nkind: policy\nname: doc-quiet\nselect: {networks: [ci-doc]}\ningress: []\n---\n" +
		"name: inside\ncommand: [\"" + d.prog + "\", signals]\nnetwork: ci-doc\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitState(t, "inside", api.StateRunning)
	var nets []api.Network
	decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
	if len(nets) != 1 || nets[0].Name != "ci-doc" || nets[0].Egress {
		t.Errorf("networks: %+v; want ci-doc with egress off, from the file", nets)
	}
	if out := d.mustCLI(t, "policies"); !strings.Contains(out, "doc-quiet") {
		t.Errorf("policies: %s; want doc-quiet, from the file", out)
	}
	for _, args := range [][]string{{"policies", "rm", "doc-quiet"}, {"apply", "-f", d.writeSpec(t, "n.yaml", "kind: network\nname: ci-doc\n")}} {
		if _, errOut, code := runCLI(t, d.socket, args...); code != 1 || !strings.Contains(errOut, "belongs to stack.yaml") {
			t.Errorf("%v of a file's document: exit %d, %s; want a conflict naming the file", args, code, errOut)
		}
	}
	// A daemon restart keeps whose they are; the file's removal takes them.
	d.terminate(t)
	d = startDaemon(t, inDir(d.dir))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the file's documents gone with it", func() error {
		if out := d.mustCLI(t, "policies"); strings.Contains(out, "doc-quiet") {
			return fmt.Errorf("policies: %s", out)
		}
		var nets []api.Network
		decodeJSON(t, d.mustCLI(t, "networks", "--json"), &nets)
		if len(nets) != 0 {
			return fmt.Errorf("networks: %+v", nets)
		}
		return nil
	})
}
