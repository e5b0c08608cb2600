package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/flyd/flyd.sock"

// HomeSocket is the socket of FLYD_HOME's daemon when FLYD_HOME is set (a
// daemon beside the installed one, keeping all it has in one directory),
// DefaultSocket otherwise.
func HomeSocket() string {
	if home := os.Getenv("FLYD_HOME"); home != "" {
		return filepath.Join(home, "flyd.sock")
	}
	return DefaultSocket
}

// Client talks to a daemon over its Unix socket. It implements
// server.Backend. It may be used by several goroutines at once.
type Client struct {
	socket string
	conns  pool
}

// NewClient returns a client for the daemon listening on socket.
func NewClient(socket string) *Client {
	return &Client{socket: socket}
}

// dial connects to the daemon, if it is one the client trusts.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, c.dialError(err)
	}
	if err := trustServer(nc, c.socket); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// trustServer refuses a socket that neither root nor this user serves,
// before anything (a spec's secret_env) is sent: whoever could replace the
// socket file must not get to read what the CLI says to the daemon.
func trustServer(c net.Conn, socket string) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("%w: who serves %s: not a Unix socket", errdefs.ErrForbidden, socket)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: who serves %s: %v", errdefs.ErrForbidden, socket, err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return fmt.Errorf("%w: who serves %s: %v", errdefs.ErrForbidden, socket, errors.Join(err, cerr))
	}
	if cred.Uid != 0 && cred.Uid != uint32(os.Getuid()) {
		return fmt.Errorf("%w: %s is served by uid %d (pid %d), neither root nor you: not talking to it", errdefs.ErrForbidden, socket, cred.Uid, cred.Pid)
	}
	return nil
}

// Close releases idle connections.
func (c *Client) Close() { c.conns.closeAll() }

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, out any) error {
	resp, err := c.send(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.body).Decode(out); err != nil {
			return err
		}
	}
	// What is left (the encoder's newline) is read, so that the
	// connection serves the next request.
	_, err = io.Copy(io.Discard, resp.body)
	return err
}

// encodedBody is a request's body already encoded as JSON.
type encodedBody []byte

// send performs a request and turns an error answer into an *Error.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body any) (*response, error) {
	var b []byte
	switch body := body.(type) {
	case nil:
	case encodedBody:
		b = body
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	target := path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	resp, err := c.roundTrip(ctx, method, target, b)
	if err != nil {
		return nil, err
	}
	if resp.code < 300 {
		return resp, nil
	}
	defer resp.body.Close()
	var eb ErrorBody
	if json.NewDecoder(io.LimitReader(resp.body, 1<<20)).Decode(&eb) != nil || eb.Error == nil {
		return nil, &Error{Status: resp.code, Code: "internal", Message: resp.text}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.body, 4<<10))
	eb.Error.Status = resp.code
	return nil, eb.Error
}

func (c *Client) dialError(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ECONNREFUSED):
		return fmt.Errorf("%w: no flyd daemon answers on %s (is it running? set --socket or FLYD_SOCKET)", errdefs.ErrUnavailable, c.socket)
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: permission denied on %s (root or %s is needed)", errdefs.ErrForbidden, c.socket, socketGroup(c.socket))
	}
	return err
}

// socketGroup names the group whose members may use the socket: the
// socket file's own group, whatever the daemon was told to use.
func socketGroup(socket string) string {
	fi, err := os.Stat(socket)
	if err != nil {
		return "the socket's group"
	}
	gid := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid))
	if g, err := user.LookupGroupId(gid); err == nil {
		return "group " + g.Name
	}
	return "group " + gid
}

func workloadPath(name string, rest ...string) string {
	p := "/v1/workloads/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	return &st, c.do(ctx, "GET", "/v1/status", nil, nil, &st)
}

func (c *Client) List(ctx context.Context) ([]Workload, error) {
	var ws []Workload
	return ws, c.do(ctx, "GET", "/v1/workloads", nil, nil, &ws)
}

// ListProject lists one project's workloads ("" for the default
// project's): what a wait on a project polls, however many others the
// host runs.
func (c *Client) ListProject(ctx context.Context, project string) ([]Workload, error) {
	var ws []Workload
	return ws, c.do(ctx, "GET", "/v1/workloads", url.Values{"project": {project}}, nil, &ws)
}

func (c *Client) Get(ctx context.Context, name string) (*Workload, error) {
	var w Workload
	if err := c.do(ctx, "GET", workloadPath(name), nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Put applies a spec through the API, as its owner: Apply without force.
func (c *Client) Put(ctx context.Context, ws *spec.Workload, start bool) (*Workload, error) {
	return c.Apply(ctx, ws, ApplyOptions{Start: start})
}

func (c *Client) Apply(ctx context.Context, ws *spec.Workload, o ApplyOptions) (*Workload, error) {
	var w Workload
	if err := c.do(ctx, "PUT", workloadPath(ws.Name), applyQuery(o), ws, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

func applyQuery(o ApplyOptions) url.Values {
	q := url.Values{}
	if !o.Start {
		q.Set("start", "false")
	}
	if o.Force {
		q.Set("force", "true")
	}
	return q
}

func (c *Client) lifecycle(ctx context.Context, name, op string, q url.Values) (*Workload, error) {
	var w Workload
	if err := c.do(ctx, "POST", workloadPath(name, op), q, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

func (c *Client) Start(ctx context.Context, name string) (*Workload, error) {
	return c.lifecycle(ctx, name, "start", nil)
}

func (c *Client) Stop(ctx context.Context, name string) (*Workload, error) {
	return c.lifecycle(ctx, name, "stop", nil)
}

func (c *Client) Kill(ctx context.Context, name string) (*Workload, error) {
	return c.lifecycle(ctx, name, "stop", url.Values{"force": {"true"}})
}

func (c *Client) Restart(ctx context.Context, name string) (*Workload, error) {
	return c.lifecycle(ctx, name, "restart", nil)
}

func (c *Client) Scale(ctx context.Context, name string, replicas int, o ApplyOptions) (*Workload, error) {
	q := url.Values{"replicas": {strconv.Itoa(replicas)}}
	if !o.Start {
		q.Set("start", "false")
	}
	if o.Force {
		q.Set("force", "true")
	}
	return c.lifecycle(ctx, name, "scale", q)
}

func (c *Client) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	return c.do(ctx, "POST", workloadPath(name, "signal"), url.Values{"sig": {strconv.Itoa(int(sig))}}, nil, nil)
}

// Delete removes a workload through the API, without force.
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.Remove(ctx, name, RemoveOptions{})
}

func (c *Client) Remove(ctx context.Context, name string, o RemoveOptions) error {
	var q url.Values
	if o.Force {
		q = url.Values{"force": {"true"}}
	}
	return c.do(ctx, "DELETE", workloadPath(name), q, nil, nil)
}

func (c *Client) Ports(ctx context.Context) ([]PortMapping, error) {
	var ps []PortMapping
	return ps, c.do(ctx, "GET", "/v1/ports", nil, nil, &ps)
}

func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var st Stats
	return &st, c.do(ctx, "GET", "/v1/stats", nil, nil, &st)
}

// documentsPath is the route of a kind's documents: /v1/PLURAL.
func documentsPath(kind string) (string, error) {
	k, ok := spec.DocKindOf(kind)
	if !ok {
		return "", fmt.Errorf("%w: no document kind %q", errdefs.ErrInvalid, kind)
	}
	return "/v1/" + k.Plural, nil
}

// Documents lists the documents of a kind as the daemon shows them, a JSON
// array (json.RawMessage) of objects each with its "name"; DocumentsOf
// decodes it.
func (c *Client) Documents(ctx context.Context, kind string) (any, error) {
	path, err := documentsPath(kind)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := c.do(ctx, "GET", path, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// PutDocument records a document and puts it in force; the answer is what
// the daemon shows of it (json.RawMessage), as its kind's list does.
func (c *Client) PutDocument(ctx context.Context, doc spec.Document) (any, error) {
	path, err := documentsPath(doc.DocKind())
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := c.do(ctx, "PUT", path+"/"+url.PathEscape(doc.DocName()), nil, doc, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteDocument removes the document of a kind named name.
func (c *Client) DeleteDocument(ctx context.Context, kind, name string) error {
	path, err := documentsPath(kind)
	if err != nil {
		return err
	}
	return c.do(ctx, "DELETE", path+"/"+url.PathEscape(name), nil, nil, nil)
}

// DocumentsOf lists the documents of a kind, decoded as V: Network for
// "network", Policy for "policy", spec.Workspace for "workspace".
func DocumentsOf[V any](ctx context.Context, c *Client, kind string) ([]V, error) {
	raw, err := c.Documents(ctx, kind)
	if err != nil {
		return nil, err
	}
	var out []V
	if err := json.Unmarshal(raw.(json.RawMessage), &out); err != nil {
		return nil, fmt.Errorf("the daemon's %s documents: %w", kind, err)
	}
	return out, nil
}

func (c *Client) Events(ctx context.Context, after uint64) (<-chan Event, error) {
	return c.events(ctx, after, url.Values{})
}

// ProjectEvents is Events of one project alone ("" the default
// project's), filtered by the daemon.
func (c *Client) ProjectEvents(ctx context.Context, after uint64, project string) (<-chan Event, error) {
	return c.events(ctx, after, url.Values{"project": {project}})
}

func (c *Client) events(ctx context.Context, after uint64, q url.Values) (<-chan Event, error) {
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	resp, err := c.send(ctx, "GET", "/v1/events", q, nil)
	if err != nil {
		return nil, err
	}
	ch := make(chan Event)
	go func() {
		defer close(ch)
		defer resp.body.Close()
		sc := bufio.NewScanner(resp.body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev Event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}
