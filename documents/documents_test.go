package documents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/documents/documentstest"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/netplane"
	"github.com/flyd-dev/flyd/records"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
	"github.com/flyd-dev/flyd/workspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// house is the documents over the parts a daemon opens under dir: the
// records, the event bus and a network plane without a pool or a
// firewall (no nf_tables here: a policy is refused), restored.
type house struct {
	docs   *Documents
	store  *records.Store
	events *events.Bus
	net    *netplane.Plane
}

func open(t *testing.T, dir string) *house {
	t.Helper()
	state, run := filepath.Join(dir, "state"), filepath.Join(dir, "run")
	st, err := records.Open(state, run, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	bus, err := events.Open(filepath.Join(state, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	net, err := netplane.Open(netplane.Config{Store: st, StateDir: state, RunDir: run, Logger: zap.NewNop(),
		ContainerPorts: func(spec.Kind) bool { return false },
		Event:          func(ev status.Event) { ev.Time = time.Now(); _ = bus.Publish(ev) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// As a supervisor of no workloads restores it when it starts: the
	// documents are read, an older daemon's files moved in.
	net.Restore(nil, nil, nil)
	docs, err := New(Config{Owners: st.Owners(), Events: bus, Keepers: withEveryKind(map[string]Keeper{
		spec.KindNetwork: Networks(net, nil), spec.KindPolicy: Policies(net), spec.KindWorkspace: workspace.Open(st, zap.NewNop()),
	})})
	if err != nil {
		t.Fatal(err)
	}
	return &house{docs: docs, store: st, events: bus, net: net}
}

// withEveryKind is keepers with one in memory for every other kind of the
// table.
func withEveryKind(keepers map[string]Keeper) map[string]Keeper {
	for _, k := range spec.DocKinds() {
		if keepers[k.Name] == nil {
			keepers[k.Name] = documentstest.NewMemory()
		}
	}
	return keepers
}

// listNetworks is the networks as the API lists them.
func listNetworks(h *house) ([]api.Network, error) {
	v, err := h.docs.List(context.Background(), spec.KindNetwork)
	if err != nil {
		return nil, err
	}
	return v.([]api.Network), nil
}

// close closes the parts in a daemon's order.
func (h *house) close() {
	h.net.Wait()
	h.events.Close()
	_ = h.store.Close()
}

// TestDocumentsOwnedByFiles: a network document a file puts is the file's:
// the API may not change or remove it, another file may not take it, and
// whose it is survives a restart; the file dropping it takes it back to the
// defaults. A policy refused (no nf_tables here) leaves no owner behind.
func TestDocumentsOwnedByFiles(t *testing.T) {
	dir := t.TempDir()
	h := open(t, dir)
	ctx := context.Background()
	off := false
	n := &spec.Network{Kind: spec.KindNetwork, Name: "ci-doc", Egress: &off}
	if err := h.docs.PutDocOwned(ctx, n, "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	conflict := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "stack.yaml") {
			t.Errorf("%s: %v; want a conflict naming stack.yaml", what, err)
		}
	}
	_, err := h.docs.Put(ctx, &spec.Network{Kind: spec.KindNetwork, Name: "ci-doc"})
	conflict("the API's put", err)
	conflict("the API's delete", h.docs.Delete(ctx, spec.KindNetwork, "ci-doc"))
	conflict("another file's put", h.docs.PutDocOwned(ctx, n, "other.yaml"))
	if h.net.Doc("ci-doc").AllowsEgress() {
		t.Error("the file's document is not in force")
	}
	h.close()

	h = open(t, dir)
	defer h.close()
	if owned, _ := h.docs.OwnedDocuments(ctx); owned["network/ci-doc"] != "stack.yaml" || len(owned) != 1 {
		t.Fatalf("owners after a restart: %v", owned)
	}
	if err := h.docs.DropDocOwned(ctx, spec.KindNetwork, "ci-doc", "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	if owned, _ := h.docs.OwnedDocuments(ctx); len(owned) != 0 || h.net.Doc("ci-doc") != nil {
		t.Errorf("after the drop: owners %v, document %+v; want neither", owned, h.net.Doc("ci-doc"))
	}

	p := &spec.Policy{Kind: spec.KindPolicy, Name: "quiet", Select: spec.Selector{Networks: []string{"ci-doc"}}}
	if err := h.docs.PutDocOwned(ctx, p, "stack.yaml"); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("a policy without nf_tables: %v", err)
	}
	if owned, _ := h.docs.OwnedDocuments(ctx); len(owned) != 0 {
		t.Errorf("a refused policy left an owner: %v", owned)
	}
	var events []string
	h.events.Replay(0, h.events.Last(), func(ev status.Event) bool {
		if ev.Type == status.EventNetwork {
			events = append(events, ev.Message)
		}
		return true
	})
	if len(events) != 2 || !strings.Contains(events[0], "network ci-doc applied from stack.yaml") || !strings.Contains(events[1], "removed with stack.yaml") {
		t.Errorf("network events %q", events)
	}
}

// TestNetworkDocumentWithoutNamespace: a network's document is listed
// before any workload of it runs, and `networks rm` takes it whether or not
// a namespace exists.
func TestNetworkDocumentWithoutNamespace(t *testing.T) {
	h := open(t, t.TempDir())
	defer h.close()
	ctx := context.Background()
	off := false
	v, err := h.docs.Put(ctx, &spec.Network{Kind: spec.KindNetwork, Name: "ci-later", Egress: &off, Peers: true})
	if nw, _ := v.(*api.Network); err != nil || nw == nil || nw.Name != "ci-later" {
		t.Fatalf("put: %+v, %v", v, err)
	}
	ns, err := listNetworks(h)
	if err != nil || len(ns) != 1 || ns[0].Name != "ci-later" || ns[0].Egress || len(ns[0].Workloads) != 0 {
		t.Fatalf("networks %+v, %v; want the document alone", ns, err)
	}
	if err := h.docs.Delete(ctx, spec.KindNetwork, "ci-later"); err != nil {
		t.Fatal(err)
	}
	if ns, _ := listNetworks(h); len(ns) != 0 || h.net.Doc("ci-later") != nil {
		t.Errorf("after networks rm: %+v", ns)
	}
	if err := h.docs.Delete(ctx, spec.KindNetwork, "ci-later"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("removing it again: %v; want not_found", err)
	}
}

// TestDocumentsMoveIntoTheJournal: the whole files an older daemon kept
// its network and policy documents and their owners in are moved into the
// one journal of the desired state, document by document, and removed;
// the documents are there after the next restart too, and a change of one
// is durable on its own.
func TestDocumentsMoveIntoTheJournal(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"networks.json":        `{"ci-old":{"kind":"network","name":"ci-old","egress":false},"ci-two":{"kind":"network","name":"ci-two"}}`,
		"policies.json":        `{"quiet":{"kind":"policy","name":"quiet","select":{"networks":["ci-old"]},"ingress":[]}}`,
		"document-owners.json": `{"network/ci-old":"stack.yaml"}`,
	}
	for f, text := range files {
		if err := os.WriteFile(filepath.Join(filepath.Join(dir, "state"), f), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := open(t, dir)
	ctx := context.Background()
	check := func(when string, two bool) {
		t.Helper()
		if doc := h.net.Doc("ci-old"); doc == nil || doc.AllowsEgress() || (h.net.Doc("ci-two") != nil) != two {
			t.Errorf("%s: network documents %+v, %+v", when, doc, h.net.Doc("ci-two"))
		}
		if !h.net.HasPolicy("quiet") {
			t.Errorf("%s: the policy is lost", when)
		}
		if owned, _ := h.docs.OwnedDocuments(ctx); owned["network/ci-old"] != "stack.yaml" {
			t.Errorf("%s: owners %v", when, owned)
		}
	}
	check("after the move", true)
	for f := range files {
		if _, err := os.Stat(filepath.Join(filepath.Join(dir, "state"), f)); !os.IsNotExist(err) {
			t.Errorf("%s is left after the move: %v", f, err)
		}
	}
	if err := h.docs.Delete(ctx, spec.KindNetwork, "ci-two"); err != nil {
		t.Fatal(err)
	}
	h.close()
	h = open(t, dir)
	defer h.close()
	check("after a restart", false) // ci-two's deletion held
}

// TestReadings: the documents answer without a kernel's network; a policy
// is refused without nf_tables, one that is not there is not found, and
// one a file no longer defines that is not there is gone already.
func TestReadings(t *testing.T) {
	h := open(t, t.TempDir())
	defer h.close()
	ctx := context.Background()
	if ns, err := listNetworks(h); err != nil || len(ns) != 0 {
		t.Errorf("networks %+v, %v; want none", ns, err)
	}
	if ps, err := h.docs.List(ctx, spec.KindPolicy); err != nil || len(ps.([]api.Policy)) != 0 {
		t.Errorf("policies %+v, %v", ps, err)
	}
	if _, err := h.docs.Put(ctx, &spec.Policy{Kind: spec.KindPolicy, Name: "p", Select: spec.Selector{Networks: []string{"x"}}}); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("a policy without nf_tables: %v", err)
	}
	if err := h.docs.Delete(ctx, spec.KindPolicy, "p"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleting no policy: %v", err)
	}
	if err := h.docs.DropDocOwned(ctx, spec.KindPolicy, "gone", "a.yaml"); err != nil {
		t.Errorf("dropping a policy that is not there: %v", err)
	}
}

// TestEveryKindHasItsKeeper: documents without a keeper for a kind of the
// table, or with one for no kind, are refused at their start, never when a
// document of it comes.
func TestEveryKindHasItsKeeper(t *testing.T) {
	h := open(t, t.TempDir())
	defer h.close()
	keepers := withEveryKind(map[string]Keeper{})
	delete(keepers, spec.KindWorkspace)
	if _, err := New(Config{Owners: h.store.Owners(), Events: h.events, Keepers: keepers}); err == nil || !strings.Contains(err.Error(), "no keeper for the workspace documents") {
		t.Errorf("without the workspaces' keeper: %v", err)
	}
	keepers[spec.KindWorkspace] = workspace.Open(h.store, zap.NewNop())
	keepers["volume"] = Networks(h.net, nil)
	if _, err := New(Config{Owners: h.store.Owners(), Events: h.events, Keepers: keepers}); err == nil || !strings.Contains(err.Error(), `"volume", which is no document kind`) {
		t.Errorf("with a keeper of no kind: %v", err)
	}
}
