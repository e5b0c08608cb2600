package project

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/documents/documentstest"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/supervisor/supervisortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open is a real supervisor over the native runtime, and its projects.
func open(t *testing.T) (*supervisor.Supervisor, *Projects) {
	t.Helper()
	return openWith(t, supervisor.Config{})
}

// openWith is open with cfg's settings beside the paths and the runtime.
func openWith(t *testing.T, cfg supervisor.Config) (*supervisor.Supervisor, *Projects) {
	t.Helper()
	dir := t.TempDir()
	cfg.StateDir, cfg.RunDir = filepath.Join(dir, "state"), filepath.Join(dir, "run")
	cfg.Drivers, cfg.StopOnClose = []driver.Driver{native.Driver{}}, true
	s, parts := supervisortest.OpenWithParts(t, cfg)
	keepers := map[string]documents.Keeper{
		spec.KindNetwork: documents.Networks(parts.Net, nil), spec.KindPolicy: documents.Policies(parts.Net), spec.KindWorkspace: parts.Workspaces,
	}
	for _, k := range spec.DocKinds() {
		if keepers[k.Name] == nil {
			keepers[k.Name] = documentstest.NewMemory()
		}
	}
	docs, err := documents.New(documents.Config{Owners: parts.Store.Owners(), Events: parts.Events, Keepers: keepers})
	if err != nil {
		t.Fatal(err)
	}
	return s, New(s, docs, driver.NewRuntimes([]driver.Driver{native.Driver{}}))
}

// sleeper is a workload that runs until stopped, and stops at once.
func sleeper(name string) *spec.Workload {
	w := &spec.Workload{Name: name, Command: []string{"/bin/sleep", "600"}}
	w.SetDefaults()
	w.Stop.Timeout = spec.Duration{Duration: 2 * time.Second}
	return w
}

func waitRunning(t *testing.T, s *supervisor.Supervisor, name string) *status.Workload {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := s.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if w.State == status.Running {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s, want running (last error %q)", name, w.State, w.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUpAndDown: up makes a project what its documents say and removes
// what they no longer hold; names resolve within the project; a
// workspace's configuration reaches the project's runs; another project of
// the same names is untouched; down removes all of one, and a project with
// nothing is not found.
func TestUpAndDown(t *testing.T) {
	s, p := open(t)
	ctx := context.Background()
	docs := func(names ...string) Documents {
		var out Documents
		for _, n := range names {
			w := sleeper(n)
			if n == "app" {
				w.After = []string{"db:started"}
			}
			out.Workloads = append(out.Workloads, w)
			if n == "old" {
				out.Docs = append(out.Docs, &spec.Network{Kind: spec.KindNetwork, Name: "old"})
			}
		}
		out.Docs = append(out.Docs, &spec.Workspace{Kind: spec.KindWorkspace, Name: "default", Configuration: spec.Configurations{"c": {"k": "v"}}})
		return out
	}
	for _, proj := range []string{"p1", "p2"} {
		ch, err := p.Up(ctx, proj, docs("db", "app", "old"), supervisor.ApplyOptions{Start: true})
		if err != nil || len(ch.Applied) != 3 {
			t.Fatalf("up %s: %+v, %v", proj, ch, err)
		}
		for _, o := range ch.Applied {
			if o.Err != nil || !strings.HasPrefix(o.Name, proj+".") {
				t.Errorf("up %s applied %s: %v", proj, o.Name, o.Err)
			}
		}
		waitRunning(t, s, proj+".app")
	}
	app, _ := s.Get(ctx, "p1.app")
	if app.Spec.After[0] != "p1.db:started" {
		t.Errorf("p1.app waits for %v; want its own project's db", app.Spec.After)
	}
	// The run's own environment, as the kernel keeps it.
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", app.PID))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(env, []byte("\x00CODEFLY__WORKSPACE_CONFIGURATION__C__K=v\x00")) {
		t.Errorf("p1.app's run has not its workspace's configuration: %q", env)
	}

	ch, err := p.Up(ctx, "p1", docs("db", "app"), supervisor.ApplyOptions{Start: true})
	if err != nil || len(ch.Removed) != 1 || ch.Removed[0].Name != "p1.old" || len(ch.Docs[spec.KindNetwork]) != 1 || ch.Docs[spec.KindNetwork][0] != "p1.old" {
		t.Fatalf("up without old: %+v, %v; want p1.old and its network removed", ch, err)
	}
	if _, err := s.Get(ctx, "p2.old"); err != nil {
		t.Errorf("p2.old went with p1's: %v", err)
	}
	// One its files define but its profiles leave out is kept as it is.
	kept := docs("db", "app")
	kept.Keep = []string{"old"}
	if ch, err := p.Up(ctx, "p2", kept, supervisor.ApplyOptions{Start: true}); err != nil || len(ch.Removed) != 0 {
		t.Errorf("up of p2 keeping old: %+v, %v; want nothing removed", ch, err)
	}

	other := sleeper("x")
	other.Project = "p3"
	if _, err := p.Up(ctx, "p1", Documents{Workloads: []*spec.Workload{other}}, supervisor.ApplyOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("up of a document of another project: %v; want refused", err)
	}
	if _, err := p.Up(ctx, "Not_A_Label", docs("db"), supervisor.ApplyOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("up of a project not a DNS label: %v", err)
	}

	ch, err = p.Down(ctx, "p1", supervisor.RemoveOptions{})
	if err != nil || len(ch.Removed) != 2 || len(ch.Docs[spec.KindWorkspace]) != 1 {
		t.Fatalf("down p1: %+v, %v", ch, err)
	}
	for _, w := range s.List(ctx) {
		if spec.ProjectOf(w.Name) == "p1" {
			t.Errorf("%s is left after down", w.Name)
		}
	}
	if _, err := p.Down(ctx, "p1", supervisor.RemoveOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a second down: %v; want not found", err)
	}
	if names, _, _ := p.docs.Names(ctx, spec.KindWorkspace); len(names) != 1 {
		t.Errorf("workspaces left: %v; want p2's", names)
	}
}

// TestUpsOfAProjectWait: a second up or down of a project waits for the
// first, and gives up with its context; another project's goes on.
func TestUpsOfAProjectWait(t *testing.T) {
	_, p := open(t)
	unlock, err := p.lock(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Down(ctx, "p1", supervisor.RemoveOptions{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a down while an up holds p1: %v; want a conflict", err)
	}
	if _, err := p.Down(context.Background(), "p2", supervisor.RemoveOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a down of p2 meanwhile: %v; want not found", err)
	}
	unlock()
	if _, err := p.Down(context.Background(), "p1", supervisor.RemoveOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a down of p1 after: %v; want not found", err)
	}
}

// volumeKeeper is a runtime's named volumes (driver.VolumeRemover), by
// project.
type volumeKeeper map[string][]string

func (k volumeKeeper) Volumes(project string) ([]string, error) { return k[project], nil }

func (volumeKeeper) Available(context.Context, spec.Kind) error { return nil }

func (k volumeKeeper) RemoveVolumes(ctx context.Context, project string) ([]string, error) {
	names := k[project]
	delete(k, project)
	return names, nil
}

// TestDownVolumes: a down with its volumes removes the project's named
// volumes, even of a project with no workload left; a confined caller is
// refused them, and one with none is refused nothing; a project with
// neither workloads nor volumes is not found.
func TestDownVolumes(t *testing.T) {
	_, p := open(t)
	vols := volumeKeeper{"p1": {"p1.cache", "p1.data"}}
	p.runtimes = vols
	ctx := context.Background()
	if _, err := p.Down(ctx, "p1", supervisor.RemoveOptions{Volumes: true, Confined: true}); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "p1.cache, p1.data") {
		t.Fatalf("confined down of p1's volumes: %v, want forbidden naming them", err)
	}
	if len(vols["p1"]) != 2 {
		t.Fatalf("volumes after a refused down: %v", vols)
	}
	c, err := p.Down(ctx, "p1", supervisor.RemoveOptions{Volumes: true})
	if err != nil || !slices.Equal(c.Volumes, []string{"p1.cache", "p1.data"}) {
		t.Fatalf("down of p1's volumes: %+v, %v", c, err)
	}
	if _, err := p.Down(ctx, "p1", supervisor.RemoveOptions{Volumes: true, Confined: true}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("down of p1 with nothing left: %v, want not found", err)
	}
}

// TestUpAllOrNothing: an up refused before anything is made makes
// nothing, not even a network; one that fails while it is made removes
// again what it made, and keeps what the project held before.
func TestUpAllOrNothing(t *testing.T) {
	s, p := open(t)
	ctx := context.Background()
	net := &spec.Network{Kind: spec.KindNetwork, Name: "net"}
	onNet := func(w *spec.Workload) *spec.Workload { w.Network = "net"; return w }
	nothing := func(project string) {
		t.Helper()
		if p.has(ctx, project) {
			t.Errorf("project %s holds something after a failed up: %v", project, p.contents(ctx, project))
		}
	}

	app := onNet(sleeper("app"))
	app.Uses = []string{"pg"}
	_, err := p.Up(ctx, "p1", Documents{Workloads: []*spec.Workload{onNet(sleeper("db")), app}, Docs: []spec.Document{net}}, supervisor.ApplyOptions{Start: true})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `uses[0]: "pg" names no workload of project p1`) {
		t.Errorf("up with a uses of nothing: %v", err)
	}
	nothing("p1")

	a, b := onNet(sleeper("a")), onNet(sleeper("b"))
	a.After, b.After = []string{"b"}, []string{"a"}
	if _, err := p.Up(ctx, "p1", Documents{Workloads: []*spec.Workload{a, b}, Docs: []spec.Document{net}}, supervisor.ApplyOptions{Start: true}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("up with a cycle: %v", err)
	}
	nothing("p1")

	// A kind this daemon cannot run now: refused before the first level
	// starts, naming it.
	ctr := &spec.Workload{Name: "site", Kind: spec.KindContainerd, Containerd: &spec.Containerd{Image: "docker.io/library/nginx:latest"}}
	ctr.SetDefaults()
	ctr.After = []string{"db"}
	if _, err := p.Up(ctx, "p1", Documents{Workloads: []*spec.Workload{sleeper("db"), ctr}}, supervisor.ApplyOptions{Start: true}); !errors.Is(err, errdefs.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), "workload site") || !strings.Contains(err.Error(), "nothing was made") {
		t.Errorf("up with a containerd workload and no containerd: %v", err)
	}
	nothing("p1")

	// The second level is refused once the first runs: a fixed port that
	// the first level's workload holds.
	first := sleeper("first")
	first.Endpoints = []spec.Endpoint{{Name: "tcp", Port: spec.FixedPort(18431)}}
	second := sleeper("second")
	second.After = []string{"first"}
	second.Endpoints = []spec.Endpoint{{Name: "tcp", Port: spec.FixedPort(18431)}}
	for _, w := range []*spec.Workload{first, second} {
		w.SetDefaults()
	}
	ch, err := p.Up(ctx, "p2", Documents{Workloads: []*spec.Workload{first, second}}, supervisor.ApplyOptions{Start: true})
	if err == nil || !strings.Contains(err.Error(), "removed again") {
		t.Fatalf("up whose second level is refused: %+v, %v", ch, err)
	}
	nothing("p2")
	if ch == nil || len(ch.Removed) != 1 || ch.Removed[0].Name != "p2.first" {
		t.Errorf("the change does not say p2.first was removed again: %+v", ch)
	}

	// What the project held before stays.
	upOne(t, p, "p3")
	bad := sleeper("bad")
	bad.Uses = []string{"nope"}
	if _, err := p.Up(ctx, "p3", Documents{Workloads: []*spec.Workload{bad}}, supervisor.ApplyOptions{Start: true}); err == nil {
		t.Fatal("an up of p3 with a uses of nothing was not refused")
	}
	if _, err := s.Get(ctx, "p3.db"); err != nil {
		t.Errorf("p3.db went with a refused up: %v", err)
	}
	if _, err := p.Down(ctx, "p3", supervisor.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAProjectIsOneOwners: under --peer-users a project holding a peer's
// workload is refused root's up (it would replace or remove the peer's
// workloads) and another peer's up and down, nothing made or removed;
// root may take it down.
func TestAProjectIsOneOwners(t *testing.T) {
	s, p := openWith(t, supervisor.Config{PeerLanes: true})
	ctx := context.Background()
	type caller struct {
		uid      uint32
		confined bool
	}
	root, alice, bob := caller{0, false}, caller{65534, true}, caller{65533, true}
	up := func(c caller, name string) error {
		_, err := p.Up(ctx, "pp", Documents{Workloads: []*spec.Workload{sleeper(name)}}, supervisor.ApplyOptions{Start: true, By: c.uid, Confined: c.confined})
		return err
	}
	down := func(c caller) error {
		_, err := p.Down(ctx, "pp", supervisor.RemoveOptions{By: c.uid, Confined: c.confined})
		return err
	}
	if err := up(alice, "w"); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, s, "pp.w")
	err := up(root, "x")
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "holds workload w of uid 65534") || !strings.Contains(err.Error(), "nothing was made") {
		t.Errorf("root's up of a peer's project: %v", err)
	}
	err = up(bob, "w")
	if !errors.Is(err, errdefs.ErrForbidden) || strings.Contains(err.Error(), "65534") || strings.Contains(err.Error(), " w ") {
		t.Errorf("another peer's up of a peer's project (refused, and told nothing of what it holds): %v", err)
	}
	if err := down(bob); !errors.Is(err, errdefs.ErrForbidden) {
		t.Errorf("another peer's down of a peer's project: %v", err)
	}
	if got := p.contents(ctx, "pp"); len(got) != 1 || !got["pp.w"] {
		t.Errorf("the refusals changed the project: %v", got)
	}
	// Its owner ups it again; root takes it down.
	if err := up(alice, "w"); err != nil {
		t.Errorf("the owner's up again: %v", err)
	}
	if err := down(root); err != nil {
		t.Errorf("root's down of a peer's project: %v", err)
	}
	if p.has(ctx, "pp") {
		t.Errorf("root's down left %v", p.contents(ctx, "pp"))
	}
}
