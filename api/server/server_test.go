package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/api/server"
	"github.com/flyd-dev/flyd/daemon"
	"github.com/flyd-dev/flyd/documents"
	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/driver/native"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/supervisor"
	"github.com/flyd-dev/flyd/supervisor/supervisortest"
	"github.com/flyd-dev/flyd/usage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The client serves the same interface over the socket as daemon.Backend
// in-process.
var _ server.Backend = (*api.Client)(nil)

// serve runs a real supervisor behind a real server on a Unix socket.
func serve(t *testing.T, allow func(server.Peer) bool) (*api.Client, string) {
	t.Helper()
	dir := t.TempDir()
	sup, parts := supervisortest.OpenWithParts(t, supervisor.Config{
		StateDir: filepath.Join(dir, "state"), RunDir: filepath.Join(dir, "run"),
		Drivers: []driver.Driver{native.Driver{}}, StopOnClose: true,
	})
	docs, err := documents.New(documents.Config{Owners: parts.Store.Owners(), Events: parts.Events, Keepers: daemon.Keepers(parts.Net, parts.Workspaces, nil)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "flyd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = server.New(daemon.NewBackend(sup, docs, daemon.Parts{Events: parts.Events, Runtimes: driver.NewRuntimes([]driver.Driver{native.Driver{}}), Plane: parts.Net, Usage: usage.NewSampler(nil, nil)}), allow, zap.NewNop()).Serve(ctx, l)
	}()
	c := api.NewClient(sock)
	t.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	return c, sock
}

func allowAll(server.Peer) bool { return true }

// raw sends a request over the socket without the client's help.
func raw(t *testing.T, sock, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, "http://flyd"+path, strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestErrorModel(t *testing.T) {
	c, sock := serve(t, allowAll)
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"unknown field", "PUT", "/v1/workloads/a", `{"name":"a","command":["/bin/true"],"restart":{"polcy":"always"}}`, 400, "invalid_spec", "restart.polcy"},
		{"malformed", "PUT", "/v1/workloads/a", `{"name":`, 400, "invalid_spec", ""},
		{"name mismatch", "PUT", "/v1/workloads/b", `{"name":"a","command":["/bin/true"]}`, 400, "invalid_spec", "name"},
		{"bad name", "PUT", "/v1/workloads/Bad_Name", `{"name":"Bad_Name","command":["/bin/true"]}`, 400, "invalid_spec", "name"},
		{"too large", "PUT", "/v1/workloads/a", `{"name":"a","env":{"X":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}}`, 413, "too_large", ""},
		// A project is one request: read whole past 1 MiB (to the field
		// after it), and refused only past its own cap.
		{"project over 1 MiB", "PUT", "/v1/projects/p", `{"workloads":[{"name":"a","command":["/bin/true"],"env":{"X":"` + strings.Repeat("x", 2*api.MaxBodyBytes) + `"},"comand":["x"]}]}`, 400, "invalid_spec", "workloads[0].comand"},
		{"project too large", "PUT", "/v1/projects/p", `{"workloads":[{"name":"a","env":{"X":"` + strings.Repeat("x", api.MaxProjectBytes) + `"}}]}`, 413, "too_large", ""},
		{"no runtime", "PUT", "/v1/workloads/a", `{"name":"a","kind":"nix","command":["hello"],"nix":{"flake":"path:/x"}}`, 503, "runtime_unavailable", ""},
		{"after nothing", "PUT", "/v1/workloads/a", `{"name":"a","command":["/bin/true"],"after":["b"]}`, 400, "invalid_spec", "after[0]"},
		{"not found", "GET", "/v1/workloads/nope", "", 404, "not_found", ""},
		{"no route", "GET", "/v2/nothing", "", 404, "not_found", ""},
		{"bad signal", "POST", "/v1/workloads/nope/signal?sig=SIGNOPE", "", 400, "invalid_spec", ""},
		{"batch: bad spec", "POST", "/v1/batch/apply", `{"workloads":[{"name":"a","command":["/bin/true"]},{"name":"b","comand":["x"]}]}`, 400, "invalid_spec", "workloads[1].comand"},
		{"batch: twice", "POST", "/v1/batch/apply", `{"workloads":[{"name":"a","command":["/bin/true"]},{"name":"a","command":["/bin/true"]}]}`, 400, "invalid_spec", ""},
		{"batch: cycle", "POST", "/v1/batch/apply", `{"workloads":[{"name":"a","command":["/bin/true"],"after":["b"]},{"name":"b","command":["/bin/true"],"after":["a"]}]}`, 400, "invalid_spec", "after"},
		{"batch: unknown field", "POST", "/v1/batch/stop", `{"names":["a"],"everything":true}`, 400, "invalid_spec", ""},
		{"batch: names and all", "POST", "/v1/batch/stop", `{"names":["a"],"all":true}`, 400, "invalid_spec", ""},
		{"batch: nothing named", "POST", "/v1/batch/stop", `{}`, 400, "invalid_spec", ""},
		{"batch: no such action", "POST", "/v1/batch/explode", `{"all":true}`, 400, "invalid_spec", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := raw(t, sock, tt.method, tt.path, tt.body)
			if status != tt.status || !strings.Contains(body, `"code":"`+tt.code+`"`) {
				t.Fatalf("%s %s: %d %s; want %d %s", tt.method, tt.path, status, body, tt.status, tt.code)
			}
			if tt.field != "" && !strings.Contains(body, `"field":"`+tt.field+`"`) {
				t.Fatalf("error does not name field %s: %s", tt.field, body)
			}
		})
	}
	// The client turns codes back into kinds.
	if _, err := c.Get(context.Background(), "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("client error %v is not ErrNotFound", err)
	}
}

func TestForbiddenPeerGetsNothingElse(t *testing.T) {
	c, sock := serve(t, func(server.Peer) bool { return false })
	for _, p := range []string{"/v1/status", "/v1/workloads", "/v1/events", "/nothing"} {
		status, body := raw(t, sock, "GET", p, "")
		if status != 403 || !strings.Contains(body, `"code":"forbidden"`) {
			t.Fatalf("GET %s: %d %s, want 403 forbidden", p, status, body)
		}
	}
	if _, err := c.List(context.Background()); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("client error %v is not ErrForbidden", err)
	}
}

func TestPeerPolicy(t *testing.T) {
	groups, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	self := int32(os.Getpid())
	policy := server.PeerPolicy(4242)
	tests := []struct {
		name string
		p    server.Peer
		want bool
	}{
		{"root", server.Peer{PID: self, UID: 0, GID: 0}, true},
		{"own uid", server.Peer{PID: self, UID: uint32(os.Getuid()), GID: 1}, true},
		{"primary group", server.Peer{PID: self, UID: 5000, GID: 4242}, true},
		{"stranger", server.Peer{PID: self, UID: 5000, GID: 5000}, false},
	}
	for _, tt := range tests {
		if got := policy(tt.p); got != tt.want {
			t.Errorf("%s: allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
	if server.PeerPolicy(-1)(server.Peer{PID: self, UID: 5000, GID: 5000}) {
		t.Error("without a group only root and the daemon's uid may connect")
	}
	// Supplementary groups come from /proc of the peer.
	for _, g := range groups {
		if g != 0 && !server.PeerPolicy(g)(server.Peer{PID: self, UID: 5000, GID: 5000}) {
			t.Errorf("a member of supplementary group %d was refused", g)
		}
	}
}

// serveTalker is serve with a workload "talker" that prints a line every
// 50 ms.
func serveTalker(t *testing.T) *api.Client {
	t.Helper()
	c, _ := serve(t, allowAll)
	w := &spec.Workload{Name: "talker", Command: []string{"/bin/sh", "-c", "while true; do echo tick; sleep 0.05; done"}}
	if _, err := c.Put(context.Background(), w, true); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamsEndWithTheirClients(t *testing.T) {
	c := serveTalker(t)
	ctx := context.Background()
	sctx, cancel := context.WithCancel(ctx)
	events, err := c.Events(sctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan error, 1)
	pr, pw := net.Pipe()
	go func() { logsDone <- c.Logs(sctx, "talker", api.LogQuery{Follow: true}, api.WriteLog(pw)) }()
	buf := make([]byte, 5)
	if _, err := pr.Read(buf); err != nil || string(buf) != "tick\n" {
		t.Fatalf("follow read %q, %v", buf, err)
	}
	// Drained until closed: a record written into the pipe after one
	// read would block the follow for ever, cancelled or not.
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	waitStreams(t, c, 2)
	cancel()
	for range events {
	}
	if err := <-logsDone; err != nil {
		t.Fatalf("cancelled follow returned %v", err)
	}
	pr.Close()
	waitStreams(t, c, 0)
	if err := c.Delete(ctx, "talker"); err != nil {
		t.Fatal(err)
	}
}

func waitStreams(t *testing.T, c *api.Client, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Streams == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d open streams, want %d", st.Streams, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogsCancelledAtAnyMoment: a follow whose context is cancelled at any
// point, while the request is dialled, written, answered or streamed,
// returns nil: the caller ended it.
func TestLogsCancelledAtAnyMoment(t *testing.T) {
	c := serveTalker(t)
	ctx := context.Background()
	for i := range 300 {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Logs(lctx, "talker", api.LogQuery{Tail: -1, Follow: true}, api.WriteLog(io.Discard)) }()
		time.Sleep(time.Duration(i%60) * 25 * time.Microsecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("cancelled after %s: Logs returned %v, want nil", time.Duration(i%60)*25*time.Microsecond, err)
		}
	}
	waitStreams(t, c, 0)
	if err := c.Delete(ctx, "talker"); err != nil {
		t.Fatal(err)
	}
}

// TestProjectEvents: a reader of one project's events gets those of its
// workloads and none of another project's, nor of the default project.
func TestProjectEvents(t *testing.T) {
	c, _ := serve(t, allowAll)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.ProjectEvents(ctx, 0, "ci-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plain", "ci-2.other", "ci-1.mine"} {
		if _, err := c.Put(ctx, &spec.Workload{Name: name, Command: []string{"/bin/true"}, Restart: spec.Restart{Policy: spec.RestartNever}}, true); err != nil {
			t.Fatal(err)
		}
	}
	for ev := range events {
		if ev.Project != "ci-1" || ev.Workload != "ci-1.mine" {
			t.Fatalf("a reader of ci-1's events got %+v", ev)
		}
		if ev.Type == api.EventExit {
			break // its last event: nothing of the others came before it
		}
	}
	for _, name := range []string{"plain", "ci-2.other", "ci-1.mine"} {
		_ = c.Delete(context.Background(), name)
	}
}

// TestEveryDocumentKindHasItsRoutes: each kind of the table is served at
// /v1/PLURAL by its keeper: listed as an array, a delete of nothing is
// the keeper's not found (not a missing route), and a document its name
// alone makes is put, listed and deleted.
func TestEveryDocumentKindHasItsRoutes(t *testing.T) {
	c, sock := serve(t, allowAll)
	ctx := context.Background()
	var roundTrips []string
	for _, k := range spec.DocKinds() {
		if code, body := raw(t, sock, "GET", "/v1/"+k.Plural, ""); code != http.StatusOK || !strings.HasPrefix(body, "[") {
			t.Errorf("GET /v1/%s: %d %s", k.Plural, code, body)
		}
		err := c.DeleteDocument(ctx, k.Name, "nothing")
		if !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), "no route") {
			t.Errorf("%s: delete of nothing: %v; want its keeper's not found", k.Name, err)
		}
		if code, body := raw(t, sock, "PUT", "/v1/"+k.Plural+"/other", `{"kind":"`+k.Name+`","name":"x"}`); code != http.StatusBadRequest {
			t.Errorf("PUT /v1/%s/other of x: %d %s; want it refused", k.Plural, code, body)
		}

		doc := k.New()
		if err := json.Unmarshal([]byte(`{"kind":"`+k.Name+`","name":"x"}`), doc); err != nil || doc.Validate() != nil {
			continue // the kind needs more than a name
		}
		if _, err := c.PutDocument(ctx, doc); err != nil {
			t.Errorf("%s: put: %v", k.Name, err)
			continue
		}
		listed := func() []string {
			vs, err := api.DocumentsOf[struct{ Name string }](ctx, c, k.Name)
			if err != nil {
				t.Fatalf("%s: list: %v", k.Name, err)
			}
			var names []string
			for _, v := range vs {
				names = append(names, v.Name)
			}
			return names
		}
		if names := listed(); len(names) != 1 || names[0] != "x" {
			t.Errorf("%s: listed %v after the put; want x", k.Name, names)
		}
		if err := c.DeleteDocument(ctx, k.Name, "x"); err != nil {
			t.Errorf("%s: delete: %v", k.Name, err)
		}
		if names := listed(); len(names) != 0 {
			t.Errorf("%s: listed %v after the delete", k.Name, names)
		}
		roundTrips = append(roundTrips, k.Name)
	}
	if len(roundTrips) < 2 {
		t.Errorf("round trips of %v alone; want the network's and the workspace's at least", roundTrips)
	}
}
