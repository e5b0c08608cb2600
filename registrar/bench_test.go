package registrar

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSet is the daemon's cost of telling the registrar about an
// owner of 10 instances (no network: Set only queues).
func BenchmarkSet(b *testing.B) {
	for _, tc := range []struct {
		name   string
		change bool
	}{{"unchanged", false}, {"healthy flips", true}} {
		b.Run(tc.name, func(b *testing.B) {
			r := New(Config{Registry: newFake()})
			in := instances("w", 10, 30*time.Second)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if tc.change {
					in[i%10].Healthy = !in[i%10].Healthy
					i++
				}
				r.Set("w", in)
			}
		})
	}
}

// BenchmarkSchedulerCPU measures the process CPU (user+sys) a running
// registrar costs to keep 1,000 instances with a 3 s lease, against a
// registry answering at once: all of it is the registrar's (the fake is a
// map behind a mutex). One op is a 3 s window.
func BenchmarkSchedulerCPU(b *testing.B) {
	f := newFake()
	r := New(Config{Registry: f})
	for o := range 100 {
		r.Set(fmt.Sprintf("w%03d", o), instances(fmt.Sprintf("w%03d", o), 10, 3*time.Second))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for len(f.holds()) < 1000 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // past the registration burst

	const window = 3 * time.Second
	var cpu time.Duration
	var beats uint64
	b.ResetTimer()
	for range b.N {
		before, hb := rusage(b), r.Stats().Heartbeats
		time.Sleep(window)
		cpu += rusage(b) - before
		beats += r.Stats().Heartbeats - hb
	}
	secs := float64(b.N) * window.Seconds()
	b.ReportMetric(float64(cpu.Microseconds())/1000/secs, "cpu-ms/s")
	b.ReportMetric(float64(beats)/secs, "heartbeats/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(beats, 1)), "cpu-ns/heartbeat")
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
