package records

import (
	"os"
	"testing"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/spec"
)

// BenchmarkStore is the state an apply persists: the spec record, synced
// to the state dir's disk, and the run record, replaced on the run dir's
// tmpfs. FLYD_BENCH_STATE_DIR puts the state dir on a chosen disk (the
// default is the test's temporary directory); the run dir is /dev/shm
// when it exists, as /run is in production.
func BenchmarkStore(b *testing.B) {
	stateDir := b.TempDir()
	if d := os.Getenv("FLYD_BENCH_STATE_DIR"); d != "" {
		var err error
		if stateDir, err = os.MkdirTemp(d, "store-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(stateDir) })
	}
	runDir := b.TempDir()
	if _, err := os.Stat("/dev/shm"); err == nil {
		var err error
		if runDir, err = os.MkdirTemp("/dev/shm", "store-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(runDir) })
	}
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	sp, err := spec.ParseFile("../spec/testdata/api-server.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("spec", func(b *testing.B) {
		rec := Workload{Spec: sp[0], Running: true}
		for b.Loop() {
			if err := st.SaveWorkload(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("run", func(b *testing.B) {
		rec := Run{Process: driver.State{Driver: spec.KindNative, PID: 4242, Version: 1,
			Data: []byte(`{"start_ticks":123456789,"boot_id":"0f0e0d0c-0b0a-0908-0706-050403020100","cgroup":"api-server"}`)}}
		for b.Loop() {
			if err := st.SaveRun("api-server", rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
