package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/usage"
)

// TestDocumentsOwnedByFiles: a network document a file puts is the file's:
// the API may not change or remove it, another file may not take it, and
// whose it is survives a restart; the file dropping it takes it back to the
// defaults. A policy refused (no nf_tables here) leaves no owner behind.
func TestDocumentsOwnedByFiles(t *testing.T) {
	d := newDirs(t)
	s := open(t, d, true)
	ctx := context.Background()
	off := false
	n := &spec.Network{Kind: spec.KindNetwork, Name: "ci-doc", Egress: &off}
	if err := s.PutNetworkOwned(ctx, n, "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	conflict := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "stack.yaml") {
			t.Errorf("%s: %v; want a conflict naming stack.yaml", what, err)
		}
	}
	_, err := s.PutNetwork(ctx, &spec.Network{Kind: spec.KindNetwork, Name: "ci-doc"})
	conflict("the API's put", err)
	conflict("the API's delete", s.DeleteNetwork(ctx, "ci-doc"))
	conflict("another file's put", s.PutNetworkOwned(ctx, n, "other.yaml"))
	if s.net.Doc("ci-doc").AllowsEgress() {
		t.Error("the file's document is not in force")
	}
	shut(s)

	s = open(t, d, true)
	defer shut(s)
	if owned, _ := s.OwnedDocuments(ctx); owned["network/ci-doc"] != "stack.yaml" || len(owned) != 1 {
		t.Fatalf("owners after a restart: %v", owned)
	}
	if err := s.DropNetworkOwned(ctx, "ci-doc", "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	if owned, _ := s.OwnedDocuments(ctx); len(owned) != 0 || s.net.Doc("ci-doc") != nil {
		t.Errorf("after the drop: owners %v, document %+v; want neither", owned, s.net.Doc("ci-doc"))
	}

	p := &spec.Policy{Kind: spec.KindPolicy, Name: "quiet", Select: spec.Selector{Networks: []string{"ci-doc"}}}
	if err := s.PutPolicyOwned(ctx, p, "stack.yaml"); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("a policy without nf_tables: %v", err)
	}
	if owned, _ := s.OwnedDocuments(ctx); len(owned) != 0 {
		t.Errorf("a refused policy left an owner: %v", owned)
	}
	var events []string
	s.events.Replay(0, s.events.Last(), func(ev status.Event) bool {
		if ev.Type == status.EventNetwork {
			events = append(events, ev.Message)
		}
		return true
	})
	if len(events) != 2 || !strings.Contains(events[0], "network ci-doc applied from stack.yaml") || !strings.Contains(events[1], "removed with stack.yaml") {
		t.Errorf("network events %q", events)
	}
}

// TestLanes: a confined caller may use a network of its own, or one root
// opened to peers, and no other; it holds a share of ports; it acts only on
// what it applied.
func TestLanes(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	put := func(name, network string, by uint32, endpoints int) error {
		w := fakeSpec(name, "stubborn")
		w.Network = spec.NetworkHost
		if network != "" {
			w.Network = network
		}
		for i := range endpoints {
			w.Endpoints = append(w.Endpoints, spec.Endpoint{Name: "e" + itoa(i), Port: spec.Port{Mode: spec.PortEphemeral}})
		}
		_, err := s.Apply(ctx, w, ApplyOptions{By: by, Confined: by != 0})
		return err
	}
	if err := put("root-w", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	forbidden := func(what, says string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want forbidden: %s", what, err, says)
		}
	}
	forbidden("replacing root's", "applied by uid 0", put("root-w", "", 1000, 0))
	if err := put("mine", "", 1000, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stop(authz.WithCaller(ctx, authz.Caller{UID: 1001, Confined: true}), "mine")
	forbidden("another peer's stop", "applied by uid 1000", err)
	if _, err := s.Stop(authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true}), "mine"); err != nil {
		t.Errorf("its own stop: %v", err)
	}
	forbidden("another peer's remove", "applied by uid 1000", s.Remove(ctx, "mine", RemoveOptions{By: 1001, Confined: true}))
	forbidden("more ports than its share", "holds at most 256", put("greedy", "", 1000, maxPeerPorts+1))
	outs, err := s.Batch(authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true}), ActionStop, BatchRequest{All: true})
	if err != nil || len(outs) != 1 || outs[0].Name != "mine" {
		t.Errorf("stop --all of a peer: %+v, %v; want its own workload alone", outs, err)
	}
}

// TestInstances: the registry is given nothing of a workload that does
// not run, and an instance an endpoint of one that does, healthy without
// a check.
func TestInstances(t *testing.T) {
	s := &Supervisor{cfg: Config{AdvertiseAddress: "192.0.2.7"}, hostname: "h1"}
	w := &spec.Workload{Name: "api", Kind: spec.KindNative}
	ports := []status.PortMapping{{Endpoint: "http", API: "http", Port: 18081, Network: spec.NetworkHost}}
	if ins := s.instances(w, ports, status.Stopped); ins != nil {
		t.Errorf("a stopped workload's instances: %v", ins)
	}
	if ins := s.instances(w, ports, status.Running); len(ins) != 1 || !ins[0].Healthy || ins[0].ID != "flyd-h1-api-http" {
		t.Errorf("a running workload's instances: %+v", ins)
	}
}

// TestApplyAllInOrder: a batch is applied dependencies first, whatever its
// order, and a cycle refuses all of it before anything is applied.
func TestApplyAllInOrder(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	app, db := fakeSpec("app", "stubborn"), fakeSpec("db", "stubborn")
	app.After = []string{"db"}
	outs, err := s.ApplyAll(ctx, []Change{{Spec: app, Options: ApplyOptions{Start: true}}, {Spec: db, Options: ApplyOptions{Start: true}}})
	if err != nil || len(outs) != 2 || outs[0].Name != "db" || outs[1].Name != "app" || outs[0].Err != nil || outs[1].Err != nil {
		t.Fatalf("outcomes %+v, %v; want db then app", outs, err)
	}
	x, y := fakeSpec("x", "stubborn"), fakeSpec("y", "stubborn")
	x.After, y.After = []string{"y"}, []string{"x"}
	if _, err := s.ApplyAll(ctx, []Change{{Spec: x}, {Spec: y}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a cycle: %v; want refused", err)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused batch applied x: %v", err)
	}
}

// TestRestartReloadAndReadings: restart ends the run and starts another;
// reload by signal reaches the running program and is an event; the
// readings (ports, networks, stats, policies) answer without a kernel's
// network or cgroups.
func TestRestartReloadAndReadings(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	w := fakeSpec("svc", "run")
	w.Reload = &spec.Reload{Signal: "SIGHUP"}
	w.Endpoints = []spec.Endpoint{{Name: "http", API: "http", Port: spec.Port{Mode: spec.PortEphemeral}}}
	first, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Restart(ctx, "svc")
	if err != nil || again.PID == first.PID || again.State != status.Running {
		t.Fatalf("restart: %+v, %v; want another run", again, err)
	}
	if _, err := s.Reload(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	reloaded := false
	s.events.Replay(0, s.events.Last(), func(ev status.Event) bool {
		reloaded = reloaded || ev.Type == status.EventReload && ev.Message == "reloaded by signal SIGHUP"
		return true
	})
	if !reloaded {
		t.Error("no reload event")
	}
	if _, err := s.Reload(ctx, "nobody"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("reload of nothing: %v", err)
	}
	if ps := s.Ports(ctx); len(ps) != 1 || ps[0].Workload != "svc" || ps[0].Port == 0 {
		t.Errorf("ports %+v", ps)
	}
	if ns, err := s.Networks(ctx); err != nil || len(ns) != 0 {
		t.Errorf("networks %+v, %v; want none", ns, err)
	}
	if st := s.Stats(ctx); st.Interval != usage.Interval || len(st.Workloads) != 0 {
		t.Errorf("stats without cgroups: %+v", st)
	}
	if ps := s.Policies(ctx); len(ps) != 0 {
		t.Errorf("policies %+v", ps)
	}
	if _, err := s.PutPolicy(ctx, &spec.Policy{Kind: spec.KindPolicy, Name: "p", Select: spec.Selector{Networks: []string{"x"}}}); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("a policy without nf_tables: %v", err)
	}
	if err := s.DeletePolicy(ctx, "p"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleting no policy: %v", err)
	}
}

// TestFileProblemsInStatus: a refused file of the workloads directory is in
// the status until it is good again; a policy a file no longer defines goes
// (it is not there: nothing to do).
func TestFileProblemsInStatus(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	s.FileProblem("b.yaml", errors.New("line 3: name: must be a DNS label"))
	s.FileProblem("a.yaml", errors.New("not a regular file"))
	if got := s.Status(ctx).FileProblems; len(got) != 2 || got[0].File != "a.yaml" || got[1].Error != "line 3: name: must be a DNS label" {
		t.Errorf("file problems %+v", got)
	}
	s.FileProblem("a.yaml", nil)
	if got := s.Status(ctx).FileProblems; len(got) != 1 || got[0].File != "b.yaml" {
		t.Errorf("after a.yaml is good again: %+v", got)
	}
	if err := s.DropPolicyOwned(ctx, "gone", "a.yaml"); err != nil {
		t.Errorf("dropping a policy that is not there: %v", err)
	}
}

// TestNetworkDocumentWithoutNamespace: a network's document is listed
// before any workload of it runs, and `networks rm` takes it whether or not
// a namespace exists.
func TestNetworkDocumentWithoutNamespace(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	off := false
	nw, err := s.PutNetwork(ctx, &spec.Network{Kind: spec.KindNetwork, Name: "ci-later", Egress: &off, Peers: true})
	if err != nil || nw == nil || nw.Name != "ci-later" {
		t.Fatalf("put: %+v, %v", nw, err)
	}
	ns, err := s.Networks(ctx)
	if err != nil || len(ns) != 1 || ns[0].Name != "ci-later" || ns[0].Egress || len(ns[0].Workloads) != 0 {
		t.Fatalf("networks %+v, %v; want the document alone", ns, err)
	}
	if err := s.DeleteNetwork(ctx, "ci-later"); err != nil {
		t.Fatal(err)
	}
	if ns, _ := s.Networks(ctx); len(ns) != 0 || s.net.Doc("ci-later") != nil {
		t.Errorf("after networks rm: %+v", ns)
	}
	if err := s.DeleteNetwork(ctx, "ci-later"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("removing it again: %v; want not_found", err)
	}
}

// TestDocumentsMoveIntoTheJournal: the whole files an older daemon kept
// its network and policy documents and their owners in are moved into the
// one journal of the desired state, document by document, and removed;
// the documents are there after the next restart too, and a change of one
// is durable on its own.
func TestDocumentsMoveIntoTheJournal(t *testing.T) {
	d := newDirs(t)
	if err := os.MkdirAll(d.state, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"networks.json":        `{"ci-old":{"kind":"network","name":"ci-old","egress":false},"ci-two":{"kind":"network","name":"ci-two"}}`,
		"policies.json":        `{"quiet":{"kind":"policy","name":"quiet","select":{"networks":["ci-old"]},"ingress":[]}}`,
		"document-owners.json": `{"network/ci-old":"stack.yaml"}`,
	}
	for f, text := range files {
		if err := os.WriteFile(filepath.Join(d.state, f), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, d, true)
	ctx := context.Background()
	check := func(when string, two bool) {
		t.Helper()
		if doc := s.net.Doc("ci-old"); doc == nil || doc.AllowsEgress() || (s.net.Doc("ci-two") != nil) != two {
			t.Errorf("%s: network documents %+v, %+v", when, doc, s.net.Doc("ci-two"))
		}
		if !s.net.HasPolicy("quiet") {
			t.Errorf("%s: the policy is lost", when)
		}
		if owned, _ := s.OwnedDocuments(ctx); owned["network/ci-old"] != "stack.yaml" {
			t.Errorf("%s: owners %v", when, owned)
		}
	}
	check("after the move", true)
	for f := range files {
		if _, err := os.Stat(filepath.Join(d.state, f)); !os.IsNotExist(err) {
			t.Errorf("%s is left after the move: %v", f, err)
		}
	}
	if err := s.DeleteNetwork(ctx, "ci-two"); err != nil {
		t.Fatal(err)
	}
	shut(s)
	s = open(t, d, true)
	defer shut(s)
	check("after a restart", false) // ci-two's deletion held
}
