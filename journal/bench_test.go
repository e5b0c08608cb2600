package journal

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkPut is a durable change of a 1 KiB record: one writer at a
// time, and 32 at once on distinct names as a batch apply does, where
// they share commits. FLYD_BENCH_DIR puts the journal on a chosen disk
// (a state dir's); the default is the test's temporary directory.
// Compare atomicfile's BenchmarkWrite/durable, a file replaced per change.
func BenchmarkPut(b *testing.B) {
	rec := []byte(`{"spec":"` + strings.Repeat("x", 1012) + `"}`)
	open := func(b *testing.B) *Journal {
		dir := b.TempDir()
		if d := os.Getenv("FLYD_BENCH_DIR"); d != "" {
			var err error
			if dir, err = os.MkdirTemp(d, "journal-bench-"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
		}
		j, _, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { j.Close() })
		return j
	}
	b.Run("serial", func(b *testing.B) {
		j := open(b)
		for b.Loop() {
			if err := j.Put("w", rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel-32", func(b *testing.B) {
		j := open(b)
		var n atomic.Int64
		b.SetParallelism(16) // 32 goroutines on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			name := "w" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				if err := j.Put(name, rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
