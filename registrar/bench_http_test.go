package registrar

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/registry"
	"github.com/flyd-dev/flyd/registryclient"
)

// BenchmarkHeartbeatHTTP measures the process CPU (user+sys) of what a
// daemon with the embedded registry runs to keep 1,000 instances
// registered: the registrar, the real registryclient over loopback HTTP
// and the reference registry serving it (with its snapshot file), all in
// this process, as in `flyd daemon --registry embedded`. Unlike
// BenchmarkSchedulerCPU (an in-process fake registry), the HTTP and JSON
// costs of both ends are included. "ttl=30s" is the default lease (a
// heartbeat per instance every ~10 s); "ttl=3s" matches
// BenchmarkSchedulerCPU's load. One op is one window.
func BenchmarkHeartbeatHTTP(b *testing.B) {
	for _, bc := range []struct {
		name        string
		ttl, window time.Duration
	}{{"ttl=30s", 30 * time.Second, 10 * time.Second}, {"ttl=3s", 3 * time.Second, 3 * time.Second}} {
		b.Run(bc.name, func(b *testing.B) { benchHeartbeatHTTP(b, bc.ttl, bc.window) })
	}
}

func benchHeartbeatHTTP(b *testing.B, ttl, window time.Duration) {
	dir := b.TempDir()
	keyFile := filepath.Join(dir, "registry.key")
	key, _, err := registry.LoadOrCreateKey(keyFile)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := registry.New(registry.Config{
		DefaultTTL:   registry.DefaultTTL,
		SnapshotPath: filepath.Join(dir, "registry.json"),
		Key:          key,
	})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(sctx, l) }()
	defer func() { scancel(); <-served }()

	client, err := registryclient.New("http://"+l.Addr().String(), keyFile)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	r := New(Config{Registry: client})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// The 100 owners are registered one after the other over one heartbeat
	// period (a third of the lease), as workloads started at different
	// times would be: the heartbeats are then spread evenly over a period
	// from the first window on, not bunched as after a burst (the ±10%
	// jitter takes many periods to spread a burst).
	period := ttl / 3
	for o := range 100 {
		r.Set(fmt.Sprintf("w%03d", o), instances(fmt.Sprintf("w%03d", o), 10, ttl))
		time.Sleep(period / 100)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.Stats().Registered < 1000 {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of 1000 instances registered after 30s", r.Stats().Registered)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var cpu time.Duration
	var beats uint64
	b.ResetTimer()
	for range b.N {
		before, hb := rusage(b), r.Stats().Heartbeats
		time.Sleep(window)
		cpu += rusage(b) - before
		beats += r.Stats().Heartbeats - hb
	}
	if f := r.Stats().Failures; f > 0 {
		b.Fatalf("%d failed requests", f)
	}
	secs := float64(b.N) * window.Seconds()
	b.ReportMetric(float64(cpu.Microseconds())/1000/secs, "cpu-ms/s")
	b.ReportMetric(float64(beats)/secs, "heartbeats/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(beats, 1)), "cpu-ns/heartbeat")
}
