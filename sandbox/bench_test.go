package sandbox

import (
	"fmt"
	"testing"
)

// BenchmarkCreateDelete measures a network's whole life: unshare, loopback
// up, bind mount, then unmount and remove.
func BenchmarkCreateDelete(b *testing.B) {
	n := newTestNetworks(b)
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("bench-%d", i)
		i++
		if _, err := n.Ensure(name); err != nil {
			b.Fatal(err)
		}
		if err := n.Delete(name); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnsureExisting is the common path: a network that exists.
func BenchmarkEnsureExisting(b *testing.B) {
	n := newTestNetworks(b)
	if _, err := n.Ensure("warm"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := n.Ensure("warm"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDo measures entering and leaving a namespace around an empty fn.
func BenchmarkDo(b *testing.B) {
	n := newTestNetworks(b)
	nw, err := n.Ensure("bench")
	if err != nil {
		b.Fatal(err)
	}
	fn := func() error { return nil }
	for b.Loop() {
		if err := nw.Do(fn); err != nil {
			b.Fatal(err)
		}
	}
}
