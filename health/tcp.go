package health

import (
	"context"

	"github.com/flyd-dev/flyd/sandbox"
)

// TCP connects to addr (host:port) inside nw (nil = host namespace) and
// closes: healthy when something accepts. It sends nothing, so it suits
// any protocol, and proves only that the port is open.
func TCP(nw *sandbox.Network, addr string) Probe {
	return tcpProbe{nw: nw, addr: addr}
}

type tcpProbe struct {
	nw   *sandbox.Network
	addr string
}

func (p tcpProbe) Check(ctx context.Context) error {
	conn, err := dial(ctx, p.nw, p.addr)
	if err != nil {
		return err
	}
	_ = conn.Close() // the connect was the whole check
	return nil
}
