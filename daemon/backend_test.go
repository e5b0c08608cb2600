package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/declarative"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/supervisor/supervisortest"
	"github.com/flyd-dev/flyd/usage"
)

// noApplier is a workloads directory's applier that owns nothing and is
// never asked to put anything: the directory of the test has no good file.
type noApplier struct{}

func (noApplier) PutOwned(ctx context.Context, puts []declarative.Put) []error {
	return make([]error, len(puts))
}
func (noApplier) DeleteOwned(ctx context.Context, name, owner string) error { return nil }
func (noApplier) Owned(ctx context.Context) (map[string]string, error)      { return nil, nil }
func (noApplier) PutDocOwned(ctx context.Context, doc spec.Document, owner string) error {
	return nil
}
func (noApplier) DropDocOwned(ctx context.Context, kind, name, owner string) error { return nil }
func (noApplier) OwnedDocuments(ctx context.Context) (map[string]string, error)    { return nil, nil }

// TestBackendStatus: the daemon's status puts together the supervisor's
// part with the daemon's own facts, its runtimes', the registry's, the
// event bus's and the workloads directory's.
func TestBackendStatus(t *testing.T) {
	dir := t.TempDir()
	drivers := []driver.Driver{native.Driver{}}
	s, cfg := supervisortest.OpenWithParts(t, supervisor.Config{
		StateDir: filepath.Join(dir, "state"), RunDir: filepath.Join(dir, "run"), Drivers: drivers, StopOnClose: true,
	})
	files := filepath.Join(dir, "workloads")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "bad.yaml"), []byte("name: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wd, err := declarative.New(declarative.Config{Dir: files, Applier: noApplier{}, Events: cfg.Events})
	if err != nil {
		t.Fatal(err)
	}
	if err := wd.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Minute)
	b := NewBackend(s, nil, Parts{
		Version: "v-test", Started: started, Events: cfg.Events, Runtimes: driver.NewRuntimes(drivers),
		Plane: cfg.Net, Files: wd, RegistryURL: "https://registry.test", Usage: usage.NewSampler(nil, nil),
	})
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != "v-test" || st.PID != os.Getpid() || !st.StartedAt.Equal(started) {
		t.Errorf("the daemon's own facts: %q %d %v", st.Version, st.PID, st.StartedAt)
	}
	if !st.Runtimes["native"] || st.Runtimes["containerd"] || len(st.Runtimes) != len(spec.Kinds) {
		t.Errorf("runtimes %v", st.Runtimes)
	}
	if st.Registry.URL != "https://registry.test" || st.LastEvent != cfg.Events.Last() || st.LastEvent == 0 {
		t.Errorf("registry %+v, last event %d of %d", st.Registry, st.LastEvent, cfg.Events.Last())
	}
	if len(st.FileProblems) != 1 || st.FileProblems[0].File != "bad.yaml" || st.Workloads != 0 {
		t.Errorf("file problems %+v, %d workloads", st.FileProblems, st.Workloads)
	}
	if st, err := b.Stats(ctx); err != nil || st.IntervalMS != usage.Interval.Milliseconds() || len(st.Workloads) != 0 {
		t.Errorf("stats without cgroups: %+v, %v", st, err)
	}
	if eps, err := b.Reach(ctx, ""); err != nil || len(eps) != 0 {
		t.Errorf("reach of no workload: %v, %v", eps, err)
	}
	if _, err := b.Reach(ctx, "nope"); err == nil {
		t.Error("reach of a workload the supervisor does not have: no error")
	}
}
