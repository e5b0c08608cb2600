package sandbox

import (
	"fmt"
	"testing"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// BenchmarkNetworkLifecycle is one isolated network made and deleted: an
// island with only loopback, and one linked to the host (veth pair,
// addresses, default route), deleted with its link as the network plane
// deletes one (told the link it keeps), as a caller sees it
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
			others(b, n, 0)
			for b.Loop() {
				nw, err := n.Ensure("bench")
				if err != nil {
					b.Fatal(err)
				}
				if connect {
					if nw.Link, err = n.Connect(nw, testPool); err != nil {
						b.Fatal(err)
					}
				}
				// As the network plane deletes one: told its link.
				if err := n.DeleteLinked("bench", nw.Link); err != nil {
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

// BenchmarkNetworkAmongOthers is a linked network made and deleted while
// 50 others of the same daemon are linked: what finding one network's
// link costs as networks add up (N copies of a stack).
func BenchmarkNetworkAmongOthers(b *testing.B) {
	testenv.RequireRoot(b, "namespaces and links are made on the host")
	n, err := NewNetworks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	others(b, n, 50)
	for b.Loop() {
		nw, err := n.Ensure("bench")
		if err != nil {
			b.Fatal(err)
		}
		if nw.Link, err = n.Connect(nw, testPool); err != nil {
			b.Fatal(err)
		}
		if err := n.DeleteLinked("bench", nw.Link); err != nil {
			b.Fatal(err)
		}
	}
	if err := n.Wait(); err != nil {
		b.Fatal(err)
	}
}

// others links k networks of n, deleted when the benchmark ends.
func others(b *testing.B, n *Networks, k int) {
	for i := range k {
		name := fmt.Sprintf("other-%d", i)
		nw, err := n.Ensure(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Delete(name); _ = n.Wait() })
		if _, err := n.Connect(nw, testPool); err != nil {
			b.Fatal(err)
		}
	}
}
