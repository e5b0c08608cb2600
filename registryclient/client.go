package registryclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Where `flyd registry serve` listens and keeps its key unless told
// otherwise, and so where a client looks when not told.
const (
	DefaultURL     = "http://127.0.0.1:9471"
	DefaultListen  = "127.0.0.1:9471"
	DefaultKeyFile = "/var/lib/flyd/registry.key"
)

const (
	// DefaultTimeout bounds each request, from dial to the last byte.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxConns bounds the connections to the registry: heart-beating
	// a thousand instances reuses a few keep-alive connections rather than
	// opening a thousand.
	DefaultMaxConns = 8
	// MaxResponseBytes caps every response read, so a hostile or broken
	// registry cannot exhaust the caller's memory.
	MaxResponseBytes = 4 << 20
)

// Client talks to one registry, served by one or several replicas. It is
// safe for concurrent use.
type Client struct {
	bases []string // scheme://host[:port][/prefix], no trailing slash
	// cur is the replica that answered last: requests go there first, and
	// to the next one when it cannot answer (see do). Every request loads
	// and stores it without a lock: it guards nothing else, and one stale
	// only has a request try another replica first.
	cur     atomic.Uint32
	key     string
	timeout time.Duration
	hc      *http.Client
	// ext is what the registry's last answer announced of the
	// extensions (see Extensions), extKnown set once one answered: stored
	// by every answer, and a bit taken back by compare-and-swap; it
	// guards nothing else.
	ext atomic.Uint32
}

// Option configures New.
type Option func(*options)

type options struct {
	timeout  time.Duration
	hc       *http.Client
	maxConns int
	tls      *tls.Config
}

// WithTimeout bounds each request (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithHTTPClient uses hc instead of the client's own transport. Redirects
// are still refused (on a copy of hc): following one would send the key to
// wherever the registry points.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTLS is the TLS configuration of the client's own transport, for an
// https:// registry (see CAFile); it has no effect with WithHTTPClient.
func WithTLS(tc *tls.Config) Option { return func(o *options) { o.tls = tc } }

// CAFile is a TLS configuration trusting the CA certificates (PEM) in
// path, and only them, for a registry whose certificate they signed.
func CAFile(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registry CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("registry CA %s: no PEM certificate in it", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// WithMaxConns bounds the connections of the client's own transport
// (default DefaultMaxConns); it has no effect with WithHTTPClient.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// New returns a client for the registry at baseURL (http://host:port) with
// the key read once from keyFile (see ReadKey). baseURL may name several
// replicas of one registry, comma-separated; a request that one cannot
// answer (no connection, a timeout, 502, 503 or 504) goes to the next.
func New(baseURL, keyFile string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout, maxConns: DefaultMaxConns}
	for _, f := range opts {
		f(&o)
	}
	if o.timeout <= 0 || o.maxConns <= 0 {
		return nil, errors.New("registry client: the timeout and the connection limit must be positive")
	}
	var bases []string
	for _, raw := range strings.Split(baseURL, ",") {
		base, err := parseBase(strings.TrimSpace(raw))
		if err != nil {
			return nil, err
		}
		if slices.Contains(bases, base) {
			return nil, fmt.Errorf("registry URL %q is named twice", base)
		}
		bases = append(bases, base)
	}
	key, err := ReadKey(keyFile)
	if err != nil {
		return nil, err
	}
	hc := o.hc
	if hc == nil {
		tr := newTransport(o.maxConns)
		tr.TLSClientConfig = o.tls
		hc = &http.Client{Transport: tr}
	}
	cp := *hc
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{bases: bases, key: key, timeout: o.timeout, hc: &cp}, nil
}

// parseBase refuses what would put a secret in a URL or send the key
// somewhere unexpected.
func parseBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, which might hold a pasted key.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("registry URL is not valid: %w", err)
	}
	// Quoted in errors without what could hold a secret.
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("registry URL %q: the scheme must be http or https", shown)
	case u.Host == "":
		return "", fmt.Errorf("registry URL %q: no host", shown)
	case u.User != nil:
		return "", fmt.Errorf("registry URL %q: credentials in the URL are refused; the key comes from the key file", shown)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("registry URL %q: no query or fragment is allowed", shown)
	}
	return strings.TrimRight(shown, "/"), nil
}

// newTransport keeps connections alive and bounds them. Proxies from the
// environment are not used: the key must reach the registry only.
func newTransport(maxConns int) *http.Transport {
	d := &net.Dialer{Timeout: DefaultTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		MaxConnsPerHost:       maxConns,
		MaxIdleConns:          maxConns,
		MaxIdleConnsPerHost:   maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   DefaultTimeout,
		ResponseHeaderTimeout: 0, // the per-request context bounds it
		ForceAttemptHTTP2:     true,
	}
}

// Close releases the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends one request and decodes a 2xx JSON answer into out (unless nil).
// expect maps the statuses that mean something for this call to their
// sentinels; any other error status wraps none, except 400 and 401/403.
//
// With several replicas it starts at the one that answered last and moves
// on while a replica cannot answer; each try has the whole timeout. Every
// request of the contract is safe to send twice: register is an upsert, a
// second heartbeat renews again, and a deregister that landed before its
// answer was lost comes back 404, which a caller shutting down takes as
// done. The last replica's error is returned.
func (c *Client) do(ctx context.Context, op, method, path string, body, out any, expect map[int]error) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return fmt.Errorf("registry %s: encoding the request: %w", op, err)
		}
	}
	first := int(c.cur.Load())
	var err error
	for i := range c.bases {
		n := (first + i) % len(c.bases)
		var retry bool
		err, retry = c.try(ctx, c.bases[n], op, method, path, b, body != nil, out, expect)
		if !retry || ctx.Err() != nil {
			if err == nil || !retry {
				c.cur.Store(uint32(n))
			}
			return err
		}
	}
	return err
}

// try sends the request to one replica; retry says another replica might
// answer it.
func (c *Client) try(ctx context.Context, base, op, method, path string, body []byte, hasBody bool, out any, expect map[int]error) (err error, retry bool) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return fmt.Errorf("registry %s: %w", op, err), false
	}
	req.Header.Set("X-API-Key", c.key)
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("registry %s: %w", op, err), true
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("registry %s: reading the answer: %w", op, err), true
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("registry %s: answer larger than %d bytes refused", op, MaxResponseBytes), false
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		c.announced(resp.Header)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			retry = true
		}
		return c.statusError(op, resp.StatusCode, b, expect), retry
	}
	switch o := out.(type) {
	case nil:
		return nil, false
	case *[]byte:
		*o = b
		return nil, false
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("registry %s: malformed answer (HTTP %d, %s): %w", op, resp.StatusCode, snippet(b, c.key), err), false
	}
	return nil, false
}
