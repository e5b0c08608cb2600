package atomicfile

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchDir is where the benchmarks write: FLYD_BENCH_DIR (a directory on
// the disk a state dir would be on), else the test's temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("FLYD_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "atomicfile-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkWrite is a spec record's persistence: a 1 KiB file replaced
// durably (Write) or atomically only (Replace), one writer at a time and
// 32 at once on distinct files in one directory, as a batch apply does.
// In parallel, Write's directory syncs are shared.
func BenchmarkWrite(b *testing.B) {
	data := make([]byte, 1024)
	for _, c := range []struct {
		name  string
		write func(string, []byte, os.FileMode) error
	}{{"durable", Write}, {"replace", Replace}} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			path := filepath.Join(benchDir(b), "w.json")
			for b.Loop() {
				if err := c.write(path, data, 0o600); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel-32", func(b *testing.B) {
			dir := benchDir(b)
			var n atomic.Int64
			b.SetParallelism(16) // 32 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				path := filepath.Join(dir, "w"+strconv.FormatInt(n.Add(1), 10)+".json")
				for pb.Next() {
					if err := c.write(path, data, 0o600); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
