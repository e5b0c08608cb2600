package health

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/sandbox"
)

const (
	// headerLimit bounds what a probe reads before the body: a workload
	// that streams an endless header must not grow the daemon.
	headerLimit = 64 << 10
	// drainLimit is how much of the body is read, so that a server writing
	// a short answer sees it delivered rather than reset.
	drainLimit = 4 << 10
	// statusLimit bounds the status line quoted in an error.
	statusLimit = 64
)

// HTTP GETs url inside nw (nil = host namespace) and wants status expect
// (0 = any 2xx or 3xx). Redirects are not followed: a 3xx is the
// workload's own answer. The body is drained up to a small limit and
// never quoted; an error quotes at most the status line, and the URL
// without its password. Only plain http is spoken, without proxies.
func HTTP(nw *sandbox.Network, url string, expect int) Probe {
	return httpProbe{nw: nw, url: url, expect: expect}
}

type httpProbe struct {
	nw     *sandbox.Network
	url    string
	expect int
}

// Check speaks one HTTP/1.1 exchange over a connection it dials itself,
// rather than through http.Transport: the Transport dials on goroutines of
// its own (never inside the namespace) and lets a dial outlive the
// request that started it, and a check must leave nothing running behind.
func (p httpProbe) Check(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		// A parse error quotes the whole URL, password included: keep
		// only what is wrong with it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("http probe: invalid URL: %w: %w", err, errdefs.ErrInvalid)
	}
	where := "GET " + req.URL.Redacted()
	if req.URL.Scheme != "http" {
		return fmt.Errorf("%s: scheme %q is not supported (http only): %w", where, req.URL.Scheme, errdefs.ErrInvalid)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	conn, err := dial(ctx, p.nw, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	defer conn.Close()
	// The context's end, deadline or cancellation, ends a blocked read or
	// write. Not conn.SetDeadline(ctx's deadline): that could fire before
	// ctx reports why, and the error would not say it was a timeout.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	status, err := exchange(conn, req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: no answer in time: %w", where, ctx.Err())
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	if !p.accepts(status.code) {
		return fmt.Errorf("%s: answered %q, want %s", where, status.line, p.want())
	}
	return nil
}

type statusLine struct {
	code int
	line string
}

// exchange writes req and reads the final response's status, skipping
// informational (1xx) answers, then drains a little of the body.
func exchange(conn net.Conn, req *http.Request) (statusLine, error) {
	req.Close = true // one exchange: the server may close after answering
	req.Header.Set("User-Agent", "flyd-health")
	if err := req.Write(conn); err != nil {
		return statusLine{}, err
	}
	br := bufio.NewReader(io.LimitReader(conn, headerLimit+drainLimit))
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return statusLine{}, fmt.Errorf("read response: %w", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
			_ = resp.Body.Close()
			return statusLine{code: resp.StatusCode, line: shorten(resp.Status, statusLimit)}, nil
		}
	}
}

func (p httpProbe) accepts(code int) bool {
	if p.expect == 0 {
		return code >= 200 && code < 400
	}
	return code == p.expect
}

func (p httpProbe) want() string {
	if p.expect == 0 {
		return "2xx or 3xx"
	}
	return fmt.Sprint(p.expect)
}
