package sandbox

import (
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// BenchmarkNetworkLifecycle is one isolated network made and deleted: an
// island with only loopback, and one linked to the host (veth pair,
// addresses, default route), deleted with its link, as a caller sees it
// (the kernel finishes deleting the link meanwhile), and waiting each time
// until the link is gone, as every deletion did before.
func BenchmarkNetworkLifecycle(b *testing.B) {
	testenv.RequireRoot(b, "namespaces and links are made on the host")
	for _, c := range []struct {
		name          string
		connect, wait bool
	}{{"island", false, false}, {"connected", true, false}, {"connected-waited", true, true}} {
		connect := c.connect
		b.Run(c.name, func(b *testing.B) {
			n, err := NewNetworks(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				nw, err := n.Ensure("bench")
				if err != nil {
					b.Fatal(err)
				}
				if connect {
					if _, err := n.Connect(nw, testPool); err != nil {
						b.Fatal(err)
					}
				}
				if err := n.Delete("bench"); err != nil {
					b.Fatal(err)
				}
				if c.wait {
					if err := n.Wait(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := n.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
