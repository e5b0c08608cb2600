package netalloc

import (
	"context"
	"testing"
)

func BenchmarkHashedPort(b *testing.B) {
	in := HashInput{"demo", "api", "server", "http", "http", ModeHost}
	for b.Loop() {
		HashedPort(in)
	}
}

// BenchmarkAllocateTemporaryPort allocates and releases one port in the
// host namespace. "persisted" pays two table writes (file and directory
// fsync each); "memory" is the kernel probe and the table alone.
func BenchmarkAllocateTemporaryPort(b *testing.B) {
	for _, bc := range []struct{ name, dir string }{{"persisted", b.TempDir()}, {"memory", ""}} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := NewManager(bc.dir)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				port, err := m.AllocateTemporaryPort(ctx, "host", nil, "bench", "http")
				if err != nil {
					b.Fatal(err)
				}
				if err := m.ReleasePort("host", port); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
