package registry

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkStores measures each store behind the real HTTP handler with
// n instances registered: one op is a register plus a heartbeat of one of
// them (round robin), from parallel keep-alive clients. It reports the
// pairs per second and the heartbeat latency's p50 and p99. The etcd
// store runs on the tests' 3-member loopback cluster.
//
//	go test -run '^$' -bench BenchmarkStores -benchtime 2000x ./registry
func BenchmarkStores(b *testing.B) {
	for _, st := range []storeKind{memory, etcd} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("store=%s/instances=%d", st, n), func(b *testing.B) { benchStore(b, st, n) })
		}
	}
}

func benchStore(b *testing.B, st storeKind, n int) {
	cfg := Config{DefaultTTL: DefaultTTL, Key: testKey}
	if st == etcd {
		cfg.Store = openEtcd(b, sharedEtcd(b).Endpoints())
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	conns := 4 * runtime.GOMAXPROCS(0)
	send := benchSender(b, srv.URL, conns)
	reg := func(i int) []byte {
		return fmt.Appendf(nil, `{"id":"bench-%d","name":"bench","address":"10.0.0.1","port":%d,"tags":["api=http"],"metadata":{"flyd.workload":"w"}}`, i, 1+i%65535)
	}
	hb := func(i int) []byte { return fmt.Appendf(nil, `{"id":"bench-%d"}`, i) }

	// The n instances, registered before the clock starts.
	var next atomic.Int64
	var wg sync.WaitGroup
	var fillErr atomic.Value
	for range conns {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := send(PathRegister, reg(i)); err != nil {
					fillErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := fillErr.Load().(error); err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next.Store(0)
	b.SetParallelism(4) // 4 clients per core: the requests wait on etcd, not on a CPU
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(next.Add(1)) % n
			if err := send(PathRegister, reg(i)); err != nil {
				b.Error(err)
				return
			}
			t := time.Now()
			if err := send(PathHeartbeat, hb(i)); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "hb-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "hb-p99-µs")
}
