package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The client's side of HTTP/1.1 over the daemon's socket, as much of it as
// the daemon's answers use: a request with a Content-Length body, an
// answer framed by Content-Length, chunks (the streams: logs, events) or
// the connection's end, and connections kept for the next request. It is
// here rather than net/http's client so that a CLI call does not start
// with net/http, crypto/tls and their initialisation linked, nor spend
// goroutines and threads on one exchange (BENCHMARKS.md, "CLI latency").
// The server stays net/http's.

const (
	// maxHead bounds an answer's status line and headers together, and
	// maxHeaders their number; the daemon's are a few hundred bytes.
	maxHead    = 64 << 10
	maxHeaders = 64
	// maxLine bounds one line of a head, or a chunk's size line.
	maxLine = 4 << 10
	// maxIdle is how many connections wait for the next request, and
	// idleFor how long one may; the daemon drops them after two minutes.
	maxIdle = 64
	idleFor = 30 * time.Second
)

// errMalformed is what an answer that is not HTTP/1.1 as the daemon
// speaks it wraps.
var errMalformed = errors.New("malformed answer from the daemon")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// conn is one connection to the daemon, kept between requests once an
// answer has been read to its end.
type conn struct {
	nc   net.Conn
	br   *bufio.Reader
	used time.Time // when it was last given back
}

// pool holds the connections waiting for a request.
type pool struct {
	mu   sync.Mutex // guards idle; held while a stale connection is closed
	idle []*conn
}

// get returns the most recently used live connection, or nil.
func (p *pool) get() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for len(p.idle) > 0 {
		cn := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(cn.used) < idleFor {
			return cn
		}
		cn.nc.Close()
	}
	return nil
}

func (p *pool) put(cn *conn) {
	cn.used = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdle {
		cn.nc.Close()
		return
	}
	p.idle = append(p.idle, cn)
}

func (p *pool) closeAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, cn := range idle {
		cn.nc.Close()
	}
}

// response is an answer: its status ("404 Not Found" whole in text) and
// its body, which the caller closes.
type response struct {
	code int
	text string
	body io.ReadCloser
}

// roundTrip sends a request and reads the head of its answer. A
// connection the daemon closed while it waited is replaced once, when the
// request is sure not to have been acted on: it could not be written, or
// it is one that may be repeated and nothing came back.
func (c *Client) roundTrip(ctx context.Context, method, target string, body []byte) (*response, error) {
	if strings.ContainsAny(target, " \r\n") {
		return nil, fmt.Errorf("%s %q: not a request target", method, target)
	}
	req := requestHead(method, target, body)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cn, reused := c.conns.get(), true
		if cn == nil {
			nc, err := c.dial(ctx)
			if err != nil {
				return nil, err
			}
			cn, reused = &conn{nc: nc, br: bufio.NewReaderSize(nc, maxLine)}, false
		}
		resp, written, answered, err := c.exchange(ctx, cn, method, req)
		if err == nil {
			return resp, nil
		}
		cn.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if reused && !answered && (!written || repeatable(method)) {
			continue
		}
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
}

func repeatable(method string) bool {
	return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE"
}

// requestHead is the request as it goes on the wire, body included.
func requestHead(method, target string, body []byte) []byte {
	b := make([]byte, 0, 128+len(body))
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: flyd\r\n"...)
	if body != nil {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if body != nil || method == "POST" || method == "PUT" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// aLongTimeAgo, as a deadline, fails a connection's blocked read or write
// at once: how a cancelled context ends an exchange.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on cn and reads the answer's head. written says
// whether any of req may have reached the daemon, answered whether any
// byte of an answer came.
func (c *Client) exchange(ctx context.Context, cn *conn, method string, req []byte) (resp *response, written, answered bool, err error) {
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(aLongTimeAgo) })
	n, werr := cn.nc.Write(req)
	written = n > 0 || werr == nil
	// An answer may come without the request having been read (the
	// daemon's refusal of a peer is one), so it is read even when the
	// write failed.
	h, answered, err := readHead(cn.br, method)
	if err != nil {
		stop()
		if werr != nil && !answered {
			err = werr
		}
		return nil, written, answered, err
	}
	b := &body{pool: &c.conns, cn: cn, stop: stop, keep: h.keep && werr == nil}
	switch {
	case h.chunked:
		b.r = &chunkReader{br: cn.br}
	case h.length >= 0:
		b.r = &lengthReader{br: cn.br, left: h.length}
	default:
		b.r, b.keep = eofReader{cn.br}, false
	}
	return &response{code: h.code, text: h.text, body: b}, written, true, nil
}

// head is what of an answer's head the client reads.
type head struct {
	code    int
	text    string
	length  int64 // -1: not said
	chunked bool
	keep    bool
}

// readHead reads a status line and headers. answered says whether any
// byte came.
func readHead(br *bufio.Reader, method string) (h head, answered bool, err error) {
	budget := maxHead
	line, err := readLine(br, &budget)
	if err != nil {
		if len(line) == 0 && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
			return h, false, fmt.Errorf("the daemon closed the connection without an answer: %w", io.ErrUnexpectedEOF)
		}
		return h, len(line) > 0, unexpected(err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, reason, _ := strings.Cut(rest, " ")
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return h, true, malformed("status line %q", line)
	}
	if len(code) != 3 {
		return h, true, malformed("status line %q", line)
	}
	if h.code, err = strconv.Atoi(code); err != nil || h.code < 100 {
		return h, true, malformed("status line %q", line)
	}
	if h.code < 200 {
		return h, true, malformed("an interim answer (%d) to a request that asked for none", h.code)
	}
	h.text = strings.TrimSpace(code + " " + reason)
	h.length, h.keep = -1, proto == "HTTP/1.1"
	for n := 0; ; n++ {
		if line, err = readLine(br, &budget); err != nil {
			return h, true, unexpected(err)
		}
		if line == "" {
			break
		}
		if n == maxHeaders {
			return h, true, malformed("more than %d headers", maxHeaders)
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return h, true, malformed("header line %q", line)
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			l, err := strconv.ParseInt(value, 10, 64)
			if err != nil || l < 0 || (h.length >= 0 && l != h.length) {
				return h, true, malformed("Content-Length %q", value)
			}
			h.length = l
		case "transfer-encoding":
			if !strings.EqualFold(value, "chunked") || h.chunked {
				return h, true, malformed("Transfer-Encoding %q", value)
			}
			h.chunked = true
		case "connection":
			for _, t := range strings.Split(value, ",") {
				if strings.EqualFold(strings.TrimSpace(t), "close") {
					h.keep = false
				}
			}
		}
	}
	if h.chunked && h.length >= 0 {
		return h, true, malformed("both Content-Length and chunks")
	}
	if method == "HEAD" || h.code == 204 || h.code == 304 {
		h.length, h.chunked = 0, false
	}
	return h, true, nil
}

// readLine reads a line ending in CRLF, without it, taking its length
// from budget.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	b, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(b) > *budget {
		return "", malformed("a line over %d bytes", min(maxLine, *budget))
	}
	if err != nil {
		return string(b), err
	}
	*budget -= len(b)
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return "", malformed("a line that does not end in CRLF: %q", b)
	}
	return string(b[:len(b)-2]), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// body is an answer's body. Read to its end and closed, it gives its
// connection back for the next request.
type body struct {
	pool   *pool
	cn     *conn
	r      io.Reader
	stop   func() bool // the context's hold on the connection
	keep   bool        // the answer lets the connection be used again
	done   bool        // read to its end
	closed bool
}

var errBodyClosed = errors.New("read of a closed answer")

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.stop() && b.done && b.keep {
		b.pool.put(b.cn)
		return nil
	}
	return b.cn.nc.Close()
}

// lengthReader reads a body of a said length.
type lengthReader struct {
	br   *bufio.Reader
	left int64
}

func (r *lengthReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// eofReader reads a body that ends with the connection.
type eofReader struct{ br *bufio.Reader }

func (r eofReader) Read(p []byte) (int, error) { return r.br.Read(p) }

// chunkReader reads a chunked body: each chunk's size in hex on its own
// line, its bytes, CRLF; a chunk of size 0, trailers and an empty line
// end it. A stream's Read gives what has come and does not wait for the
// next chunk's size.
type chunkReader struct {
	br    *bufio.Reader
	left  int64 // of the current chunk
	inner bool  // within a chunk whose CRLF is still to read
	err   error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for r.left == 0 {
		if r.err = r.next(); r.err != nil {
			return 0, r.err
		}
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.left -= int64(n)
	if err != nil {
		r.err = unexpected(err)
		if n > 0 {
			return n, nil
		}
		return 0, r.err
	}
	return n, nil
}

// next reads what lies between two chunks' bytes: the CRLF that ends
// one, the size line of the next, and at the last chunk the trailers.
func (r *chunkReader) next() error {
	budget := maxHead
	if r.inner {
		if line, err := readLine(r.br, &budget); err != nil || line != "" {
			return unexpected(orMalformed(err, "no CRLF after a chunk"))
		}
		r.inner = false
	}
	line, err := readLine(r.br, &budget)
	if err != nil {
		return unexpected(err)
	}
	size, _, _ := strings.Cut(line, ";") // extensions are not used
	n, err := strconv.ParseUint(strings.TrimSpace(size), 16, 62)
	if err != nil {
		return malformed("chunk size %q", line)
	}
	if n > 0 {
		r.left, r.inner = int64(n), true
		return nil
	}
	for i := 0; ; i++ {
		line, err := readLine(r.br, &budget)
		if err != nil {
			return unexpected(err)
		}
		if line == "" {
			return io.EOF
		}
		if i == maxHeaders {
			return malformed("more than %d trailers", maxHeaders)
		}
	}
}

func orMalformed(err error, what string) error {
	if err != nil {
		return err
	}
	return malformed("%s", what)
}
