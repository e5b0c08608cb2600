package netalloc_test

import (
	"context"
	"os"
	"testing"

	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/sandbox"
)

// BenchmarkAllocateInNamespace allocates and releases one ephemeral port
// inside an isolated network: the kernel probe runs on a thread switched
// into the namespace, as it does for a workload of that network.
func BenchmarkAllocateInNamespace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("creating a network namespace needs root")
	}
	nets, err := sandbox.NewNetworks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	nw, err := nets.Ensure("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer nets.Delete("bench")
	m, err := netalloc.NewManager("")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		port, err := m.AllocateTemporaryPort(ctx, "bench", nw, "bench", "http")
		if err != nil {
			b.Fatal(err)
		}
		if err := m.ReleasePort("bench", port); err != nil {
			b.Fatal(err)
		}
	}
}
