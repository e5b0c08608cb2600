package registrar

import (
	"maps"
	"slices"
	"time"

	"github.com/flyd-dev/flyd/registryclient"
)

// defaultTTL is the lease assumed for an instance that names none. The
// registry's own default is longer (90 s); assuming less only costs a few
// more heartbeats, assuming more would let leases lapse.
const defaultTTL = 30 * time.Second

// minPeriod keeps a nonsensical TTL (a few ns) from turning the heartbeat
// schedule into a busy loop.
const minPeriod = 50 * time.Millisecond

// sameContent reports whether registering b would change nothing the
// registry stores for a. Server-stamped times are not content.
func sameContent(a, b *registryclient.Instance) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Address == b.Address &&
		a.Port == b.Port && a.Protocol == b.Protocol &&
		a.Weight == b.Weight && a.Priority == b.Priority &&
		a.Healthy == b.Healthy && a.TTL == b.TTL &&
		slices.Equal(a.Tags, b.Tags) && maps.Equal(a.Metadata, b.Metadata)
}

// own copies an instance so that the caller may reuse its slices and maps;
// the copy is never mutated afterwards, so workers may read it unlocked.
func own(in *registryclient.Instance) registryclient.Instance {
	c := *in
	c.Tags = slices.Clone(in.Tags)
	c.Metadata = maps.Clone(in.Metadata)
	c.RegisteredAt, c.UpdatedAt = time.Time{}, time.Time{}
	return c
}

// leaseOf is the lease the registry grants the instance.
func leaseOf(in *registryclient.Instance) time.Duration {
	if in.TTL <= 0 {
		return defaultTTL
	}
	return time.Duration(in.TTL)
}
