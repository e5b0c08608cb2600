package health

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
)

// TCP connects to addr (host:port) inside nw (nil = host namespace) and
// closes: healthy when something accepts. It sends nothing, so it suits
// any protocol, and proves only that the port is open.
func TCP(nw *sandbox.Network, addr string) Probe {
	return tcpProbe{nw: nw, addr: addr}
}

// TCPExchange is TCP that also holds a conversation: it writes send (if
// any) once connected, and is healthy only when the reply begins with
// expect. A server that accepts but does not serve (crash recovery, a full
// accept queue) fails it. What the server replied is never quoted in the
// error: a reply may carry anything.
func TCPExchange(nw *sandbox.Network, addr, send, expect string) Probe {
	return tcpProbe{nw: nw, addr: addr, send: []byte(send), expect: []byte(expect)}
}

type tcpProbe struct {
	nw           *sandbox.Network
	addr         string
	send, expect []byte
}

func (p tcpProbe) Check(ctx context.Context) error {
	conn, err := dial(ctx, p.nw, p.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if len(p.expect) == 0 {
		return nil // the connect was the whole check
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	} else {
		_ = conn.SetDeadline(time.Now().Add(defaultTimeout))
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if len(p.send) > 0 {
		if _, err := conn.Write(p.send); err != nil {
			return fmt.Errorf("send to %s: %w", p.addr, err)
		}
	}
	reply := make([]byte, len(p.expect))
	n, err := io.ReadFull(conn, reply)
	if !bytes.Equal(reply[:n], p.expect[:n]) {
		return fmt.Errorf("%s replied bytes that are not the %d expected", p.addr, len(p.expect))
	}
	if err != nil {
		return fmt.Errorf("reply from %s, after %d of the %d bytes expected: %w", p.addr, n, len(p.expect), err)
	}
	return nil
}
