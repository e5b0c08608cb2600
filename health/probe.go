package health

import (
	"context"
	"fmt"
	"net"

	"github.com/flyd-dev/flyd/sandbox"
)

// Probe checks a workload once; nil means healthy. It must honour ctx (the
// per-check timeout): a Monitor's Stop waits for a running check.
type Probe interface {
	Check(ctx context.Context) error
}

// dial connects to addr inside nw (nil: the host namespace). Only the
// socket's creation needs the namespace: a socket stays in the namespace it
// was made in, so the connection is used afterwards from any thread.
func dial(ctx context.Context, nw *sandbox.Network, addr string) (net.Conn, error) {
	// No Happy Eyeballs: its fallback dial runs on another goroutine, which
	// inside Do would be on another thread, in the host namespace. Addresses
	// are then tried in turn on the calling goroutine. (Name lookups still
	// run on goroutines of the resolver, in the host namespace, which is
	// where /etc/hosts and any resolver live; an isolated network has only
	// loopback.)
	d := net.Dialer{FallbackDelay: -1}
	if nw == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	var conn net.Conn
	err := nw.Do(func() error {
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("in network %q: %w", nw.Name, err)
	}
	return conn, nil
}
