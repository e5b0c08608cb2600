package journal

import (
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkBoltPut is BenchmarkPut's change made in a bbolt database, the
// store a library would give: a synced transaction a change one writer at
// a time, and DB.Batch for 32 at once, which coalesces concurrent writers
// into shared transactions as the journal's group commit does. The two
// side by side are the measured reason the journal stays (BENCHMARKS.md).
func BenchmarkBoltPut(b *testing.B) {
	rec := []byte(`{"spec":"` + strings.Repeat("x", 1012) + `"}`)
	bucket := []byte("workloads")
	open := func(b *testing.B) *bolt.DB {
		db, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err }); err != nil {
			b.Fatal(err)
		}
		return db
	}
	put := func(name string) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(name), rec) }
	}
	b.Run("serial", func(b *testing.B) {
		db := open(b)
		for b.Loop() {
			if err := db.Update(put("w")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel-32", func(b *testing.B) {
		db := open(b)
		// bbolt's default waits up to 10 ms for a batch to fill; a
		// millisecond is fairer to it with 32 writers.
		db.MaxBatchDelay = time.Millisecond
		var n atomic.Int64
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			name := "w" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				if err := db.Batch(put(name)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
