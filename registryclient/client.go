package registryclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
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

// Client talks to one registry. It is safe for concurrent use.
type Client struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	key     string
	timeout time.Duration
	hc      *http.Client
}

// Option configures New.
type Option func(*options)

type options struct {
	timeout  time.Duration
	hc       *http.Client
	maxConns int
}

// WithTimeout bounds each request (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithHTTPClient uses hc instead of the client's own transport. Redirects
// are still refused (on a copy of hc): following one would send the key to
// wherever the registry points.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithMaxConns bounds the connections of the client's own transport
// (default DefaultMaxConns); it has no effect with WithHTTPClient.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// New returns a client for the registry at baseURL (http://host:port) with
// the key read once from keyFile (see ReadKey).
func New(baseURL, keyFile string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout, maxConns: DefaultMaxConns}
	for _, f := range opts {
		f(&o)
	}
	if o.timeout <= 0 || o.maxConns <= 0 {
		return nil, errors.New("registry client: the timeout and the connection limit must be positive")
	}
	base, err := parseBase(baseURL)
	if err != nil {
		return nil, err
	}
	key, err := ReadKey(keyFile)
	if err != nil {
		return nil, err
	}
	hc := o.hc
	if hc == nil {
		hc = &http.Client{Transport: newTransport(o.maxConns)}
	}
	cp := *hc
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: base, key: key, timeout: o.timeout, hc: &cp}, nil
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
func (c *Client) do(ctx context.Context, op, method, path string, body, out any, expect map[int]error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("registry %s: encoding the request: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("registry %s: %w", op, err)
	}
	req.Header.Set("X-API-Key", c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("registry %s: %w", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("registry %s: reading the answer: %w", op, err)
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("registry %s: answer larger than %d bytes refused", op, MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.statusError(op, resp.StatusCode, b, expect)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("registry %s: malformed answer (HTTP %d, %s): %w", op, resp.StatusCode, snippet(b, c.key), err)
	}
	return nil
}
