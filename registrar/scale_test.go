package registrar

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// 1,000 instances over 100 owners are served by the fixed pool: all
// registered and heart-beating, never more than Workers requests in
// flight, and a goroutine count that does not grow with the instances.
func TestThousandInstances(t *testing.T) {
	const workers, owners, per = 8, 100, 10
	base := runtime.NumGoroutine()
	g := start(t, workers)
	g.fake.setLatency("register", time.Millisecond)
	g.fake.setLatency("heartbeat", time.Millisecond)

	// Sample the goroutine count for the whole test.
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	all := map[string]bool{}
	for o := range owners {
		in := instances(fmt.Sprintf("w%03d", o), per, 1500*time.Millisecond)
		for _, id := range ids(in) {
			all[id] = true
		}
		g.r.Set(fmt.Sprintf("w%03d", o), in)
	}
	begin := time.Now()
	eventually(t, 10*time.Second, "1,000 registered", func() bool { return len(g.fake.holds()) == owners*per })
	t.Logf("1,000 registered in %v", time.Since(begin).Round(time.Millisecond))

	// Heartbeats every ~500 ms: in 1.2 s each instance beats at least once.
	time.Sleep(1200 * time.Millisecond)
	for id := range all {
		if n := g.fake.landedID(id, "heartbeat"); n < 1 {
			t.Fatalf("%s: no heartbeat in 1.2 s", id)
		}
	}
	if n := g.fake.count("register"); n != owners*per {
		t.Errorf("%d registers, want %d (one each)", n, owners*per)
	}
	s := g.r.Stats()
	if s.Desired != owners*per || s.Registered != owners*per || s.Failing != 0 {
		t.Errorf("stats %+v", s)
	}
	close(stopSampling)
	<-sampled

	_, inflight := g.fake.concurrency()
	if inflight > workers {
		t.Errorf("%d requests in flight at once, want <= %d", inflight, workers)
	}
	// Run's own goroutine (the scheduler), the workers, and the sampler.
	if extra := int(peak.Load()) - base; extra > 1+workers+1 {
		t.Errorf("%d goroutines over the baseline, want <= %d", extra, workers+2)
	}
	t.Logf("peak requests in flight %d, peak goroutines %d over baseline, heartbeats %d",
		inflight, peak.Load()-int64(base), s.Heartbeats)
}
