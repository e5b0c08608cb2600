package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
)

// Bounds on what the peers of the socket can hold, so that none of them,
// however it behaves, keeps root from using the daemon: root is counted
// in none of them (see quota), and each user other than root gets a
// share, so that no one user keeps the others out.
const (
	// MaxConns caps the connections of peers other than root at once;
	// maxConnsPerUser those of one of them.
	MaxConns        = 256
	maxConnsPerUser = 64
	// MaxStreams caps the log follows and event streams of peers other
	// than root at once; maxStreamsPerUser those of one of them.
	MaxStreams        = 64
	maxStreamsPerUser = 16
	// maxApplies caps the applies reading and checking specs at once, which
	// is where a request's memory goes: root's, and the other peers'
	// apart, maxAppliesPerUser of them one user's.
	maxApplies        = 4
	maxAppliesPerUser = 2
	// maxRefusing bounds the goroutines answering refused connections; past
	// it a refused connection is closed without an answer.
	maxRefusing = 16
)

// bodyTimeout bounds the reading of a request body; idleTimeout a
// connection that sends nothing; writeTimeout every write of an answer or
// of a stream, so a reader that stops reading is dropped. Variables only so
// that the package's tests need not wait minutes.
var (
	bodyTimeout  = 30 * time.Second
	idleTimeout  = 2 * time.Minute
	writeTimeout = 10 * time.Second
)

// gate admits connections: a peer the policy refuses is answered 403 and
// closed at once, before any HTTP is served; past MaxConns a peer other
// than root is answered 503. Admitted connections carry their peer, read
// once here.
type gate struct {
	net.Listener
	allow    func(Peer) bool
	log      *zap.Logger
	conns    *quota
	refusing chan struct{}
}

func newGate(l net.Listener, allow func(Peer) bool, log *zap.Logger) *gate {
	return &gate{Listener: l, allow: allow, log: log,
		conns: newQuota("connections", MaxConns, maxConnsPerUser), refusing: make(chan struct{}, maxRefusing)}
}

func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p, err := readPeer(c)
		switch {
		case err != nil:
			g.log.Warn("cannot read a connection's peer", zap.Error(err))
			g.refuse(c, fmt.Errorf("%w: the peer of this connection is unknown", errdefs.ErrForbidden))
			continue
		case !g.allow(p):
			g.refuse(c, fmt.Errorf("%w: uid %d may not use this socket", errdefs.ErrForbidden, p.UID))
			continue
		case p.UID == 0:
			return &peerConn{Conn: c, peer: p}, nil
		}
		if err := g.conns.take(p.UID); err != nil {
			g.log.Warn("connection refused: too many", zap.Uint32("uid", p.UID), zap.Error(err))
			g.refuse(c, err)
			continue
		}
		uid := p.UID
		return &peerConn{Conn: c, peer: p, release: func() { g.conns.give(uid) }}, nil
	}
}

// refuse answers c with err as an HTTP error and closes it, without
// holding up the accept loop. The request's head is read first, so that
// the answer is one to it (an HTTP client takes bytes that come before
// its request for a broken connection), and what follows is drained
// before the close: closing a Unix socket with unread data resets it, and
// the answer would be lost.
func (g *gate) refuse(c net.Conn, err error) {
	select {
	case g.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-g.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		r := bufio.NewReader(io.LimitReader(c, 64<<10))
		for {
			line, rerr := r.ReadString('\n')
			if rerr != nil || line == "\r\n" || line == "\n" {
				break
			}
		}
		e := toError(err)
		body, _ := json.Marshal(api.ErrorBody{Error: e})
		_ = c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			e.Status, http.StatusText(e.Status), len(body), body)
		_, _ = io.Copy(io.Discard, r)
	}()
}

// peerConn is an admitted connection: its peer, and the slot it holds.
type peerConn struct {
	net.Conn
	peer    Peer
	release func()
	once    sync.Once
}

func (c *peerConn) Close() error {
	err := c.Conn.Close()
	if c.release != nil {
		c.once.Do(c.release)
	}
	return err
}
