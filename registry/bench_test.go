package registry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRegisterHeartbeat measures one register plus one heartbeat per
// op, from parallel clients over keep-alive loopback connections: the load a
// daemon heart-beating many instances puts on the registry.
func BenchmarkRegisterHeartbeat(b *testing.B) {
	s, err := New(Config{DefaultTTL: DefaultTTL, Key: testKey})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	send := benchSender(b, srv.URL, 2*runtime.GOMAXPROCS(0))
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		n := worker.Add(1)
		reg := []byte(fmt.Sprintf(`{"id":"bench-%d","name":"bench","address":"10.0.0.1","port":%d,"tags":["api=http"],"metadata":{"flyd.workload":"w"}}`, n, 1000+n))
		hb := []byte(fmt.Sprintf(`{"id":"bench-%d"}`, n))
		for pb.Next() {
			if err := send(PathRegister, reg); err != nil {
				b.Error(err)
				return
			}
			if err := send(PathHeartbeat, hb); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// benchSender posts JSON bodies to the registry at url with the test key
// over at most conns keep-alive connections, each answer drained so that
// its connection is reused; a status but 200 is an error.
func benchSender(b *testing.B, url string, conns int) func(path string, body []byte) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	b.Cleanup(hc.CloseIdleConnections)
	return func(path string, body []byte) error {
		req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("X-API-Key", testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
		}
		return nil
	}
}
