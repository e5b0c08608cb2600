package netplane

import (
	"context"
	"os"
	"testing"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/spec"
)

// memDocs keeps documents in memory.
type memDocs map[string]map[string][]byte

func (m memDocs) Docs(kind string) map[string][]byte { return m[kind] }
func (m memDocs) PutDoc(kind, name string, b []byte) error {
	if m[kind] == nil {
		m[kind] = map[string][]byte{}
	}
	m[kind][name] = b
	return nil
}

// TestHookJoinsTheNetwork: a run of a workload of an isolated network is
// given that network's namespace, the same for every run; one of the
// host's is given none.
func TestHookJoinsTheNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	dir := t.TempDir()
	p, err := Open(Config{Store: memDocs{}, StateDir: dir + "/state", RunDir: dir + "/run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Drop("hooked"); p.Wait() })
	h := runhook.Chain{p.Hook()}
	ctx := context.Background()
	run := func(network string) *runhook.Run {
		r := &runhook.Run{Task: driver.Task{Workload: "web", Spec: &spec.Workload{Name: "web", Network: network}}}
		if err := h.Prestart(ctx, r); err != nil {
			t.Fatal(err)
		}
		h.Poststart(ctx, r)
		h.Exited(ctx, r)
		return r
	}
	if r := run(spec.NetworkHost); r.Task.Network != nil {
		t.Fatalf("a run of the host's network joins %v", r.Task.Network)
	}
	a, b := run("hooked"), run("hooked")
	if a.Task.Network == nil || b.Task.Network == nil || a.Task.Network.Path != b.Task.Network.Path {
		t.Fatalf("two runs of one network join %+v and %+v", a.Task.Network, b.Task.Network)
	}
	h.Destroy(ctx, "web")
}
