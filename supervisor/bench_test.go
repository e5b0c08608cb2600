package supervisor

import (
	"context"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

// BenchmarkApplyToRunning is one Put of a new native workload until it is
// running (the exec done), then its removal: the supervisor's own cost on
// top of fork and exec.
func BenchmarkApplyToRunning(b *testing.B) {
	d := dirs{b.TempDir() + "/state", b.TempDir() + "/run"}
	s, err := New(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers(), StopOnClose: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	w := &spec.Workload{Name: "bench", Command: []string{"/bin/sleep", "100"}}
	w.SetDefaults()
	for b.Loop() {
		got, err := s.Put(ctx, w, true)
		if err != nil || got.State != "running" {
			b.Fatalf("%v %+v", err, got)
		}
		b.StopTimer()
		if err := s.Delete(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
