package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDaemon answers each request on its socket with answer(n, head), n
// counting the requests of all connections from 0; conns counts the
// connections it accepted. answer returning "" closes the connection, as
// does an answer ending in closeAfter once it is written.
type fakeDaemon struct {
	sock  string
	conns atomic.Int32
}

func serveFake(t *testing.T, answer func(n int, head string) string) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{sock: filepath.Join(t.TempDir(), "flyd.sock")}
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			open = append(open, c)
			go func() {
				br := bufio.NewReader(c)
				for {
					var head strings.Builder
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							c.Close()
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					a := answer(int(n.Add(1)-1), head.String())
					if a == "" {
						c.Close()
						return
					}
					a, closing := strings.CutSuffix(a, closeAfter)
					if _, err := io.WriteString(c, a); err != nil || closing {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return f
}

const closeAfter = "\x00close"

// answer is an answer of status with body, framed by its length.
func answer(status, body string) string {
	return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

var okStatus = answer("200 OK", `{"version":"v1"}`+"\n")

func TestConnectionKeptForTheNextRequest(t *testing.T) {
	f := serveFake(t, func(int, string) string { return okStatus })
	c := NewClient(f.sock)
	defer c.Close()
	for range 3 {
		st, err := c.Status(context.Background())
		if err != nil || st.Version != "v1" {
			t.Fatalf("status: %+v, %v", st, err)
		}
	}
	if n := f.conns.Load(); n != 1 {
		t.Errorf("%d connections for three requests, want 1", n)
	}
}

func TestAGetIsRepeatedOnAConnectionClosedWhileIdle(t *testing.T) {
	f := serveFake(t, func(n int, _ string) string {
		if n == 1 {
			return "" // the daemon's idle close, met by the next request
		}
		return okStatus
	})
	c := NewClient(f.sock)
	defer c.Close()
	for i := range 2 {
		if _, err := c.Status(context.Background()); err != nil {
			t.Fatalf("status %d: %v", i, err)
		}
	}
	if n := f.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

func TestChunkedStream(t *testing.T) {
	// Two events split across chunks in the middle of a line, a chunk
	// extension and a trailer.
	f := serveFake(t, func(int, string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"a\r\n{\"seq\":1}\n\r\n" + "4;x=y\r\n{\"se\r\n" + "6\r\nq\":2}\n\r\n" + "0\r\nX-Trailer: 1\r\n\r\n"
	})
	c := NewClient(f.sock)
	defer c.Close()
	ch, err := c.Events(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for ev := range ch {
		seqs = append(seqs, ev.Seq)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("events %v, want [1 2]", seqs)
	}
}

func TestAStreamCutShortIsUnexpectedEOF(t *testing.T) {
	f := serveFake(t, func(int, string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + "12\r\n5 0 3\nab" + closeAfter
	})
	c := NewClient(f.sock)
	defer c.Close()
	err := c.Logs(context.Background(), "w", LogQuery{Tail: -1}, LogFunc(func(LogRecord) error { return nil }))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("logs cut short: %v, want unexpected EOF", err)
	}
}

func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		kind         error
		code         string
	}{
		{"json", answer("404 Not Found", `{"error":{"code":"not_found","message":"no such w"}}`+"\n"), errdefs.ErrNotFound, "not_found"},
		{"not json", answer("502 Bad Gateway", "oops"), nil, "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFake(t, func(int, string) string { return tc.answer })
			c := NewClient(f.sock)
			defer c.Close()
			_, err := c.Get(context.Background(), "w")
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tc.code || (tc.kind != nil && !errors.Is(err, tc.kind)) {
				t.Fatalf("got %v, want an *Error of code %s", err, tc.code)
			}
			if tc.kind == nil && ae.Message != "502 Bad Gateway" {
				t.Errorf("message %q, want the status", ae.Message)
			}
		})
	}
}

func TestMalformedAnswers(t *testing.T) {
	long := strings.Repeat("x", maxLine)
	many := strings.Repeat("X-A: 1\r\n", maxHeaders+1)
	for _, tc := range []struct{ name, answer string }{
		{"not http", "SSH-2.0-OpenSSH\r\n\r\n"},
		{"status code", "HTTP/1.1 2000 OK\r\n\r\n"},
		{"interim", "HTTP/1.1 100 Continue\r\n\r\n"},
		{"line too long", "HTTP/1.1 200 OK\r\nX-Long: " + long + "\r\n\r\n"},
		{"too many headers", "HTTP/1.1 200 OK\r\n" + many + "\r\n"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
		{"header without a colon", "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
		{"length and chunks", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
		{"chunk without its CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFake(t, func(int, string) string { return tc.answer })
			c := NewClient(f.sock)
			defer c.Close()
			_, err := c.Status(context.Background())
			if !errors.Is(err, errMalformed) {
				t.Errorf("got %v, want a malformed answer", err)
			}
		})
	}
}

func TestCancelEndsAWaitingRequest(t *testing.T) {
	f := serveFake(t, func(int, string) string {
		time.Sleep(300 * time.Millisecond) // no answer yet
		return okStatus
	})
	c := NewClient(f.sock)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Status(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 250*time.Millisecond {
		t.Errorf("got %v after %s, want the context's error at once", err, time.Since(start))
	}
}

func TestRequestHead(t *testing.T) {
	var got atomic.Value
	f := serveFake(t, func(_ int, head string) string {
		got.Store(head)
		return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	})
	c := NewClient(f.sock)
	defer c.Close()
	if err := c.Signal(context.Background(), "a b", 15); err != nil {
		t.Fatal(err)
	}
	want := "POST /v1/workloads/a%20b/signal?sig=15 HTTP/1.1\r\nHost: flyd\r\nContent-Length: 0\r\n\r\n"
	if h := got.Load(); h != want {
		t.Errorf("request head %q, want %q", h, want)
	}
}
