package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// TestBadInput feeds the daemon what it must refuse, and checks it says why
// and changes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	refused := []struct {
		name, spec string
		want       []string // in stderr
	}{
		{"malformed YAML", "name: x\ncommand: [a, b\n", []string{"malformed", "line"}},
		{"unknown key", "name: x\ncommand: [a]\nrestart:\n  backoff: {inital: 50ms}\n", []string{"restart.backoff.inital", "unknown field", "line 4"}},
		{"bad name", "name: Bad_Name\ncommand: [a]\n", []string{"name", "lowercase"}},
		{"missing command", "name: nocmd\n", []string{"command", "required"}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			file := d.writeSpec(t, "bad.yaml", c.spec)
			_, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
			if code != 1 {
				t.Errorf("apply exit %d, want 1; stderr %q", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not mention %q", errOut, w)
				}
			}
		})
	}
	t.Run("placeholder naming no endpoint", func(t *testing.T) {
		// Only the daemon knows the endpoints' ports: it refuses this one.
		file := d.writeSpec(t, "nope.yaml", "name: nope\ncommand: [\"@PROG@\", serve, \"${ADDR_NOPE}\"]\n")
		_, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
		if code != 1 || !strings.Contains(errOut, "${ADDR_NOPE}") || !strings.Contains(errOut, "invalid_spec") {
			t.Errorf("apply: exit %d, stderr %q; want 1, invalid_spec naming ${ADDR_NOPE}", code, errOut)
		}
	})
	if ws, err := d.client.List(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("refused specs left workloads: %+v, %v", ws, err)
	}

	t.Run("Go client", func(t *testing.T) {
		ctx := context.Background()
		for _, w := range []*spec.Workload{
			{Name: "Bad_Name", Command: []string{"/bin/true"}},
			{Name: "nocmd"},
			{Name: "badport", Command: []string{"/bin/true"}, Endpoints: []spec.Endpoint{{Name: "http", Port: spec.FixedPort(70000)}}},
		} {
			_, err := d.client.Put(ctx, w, true)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != "invalid_spec" || ae.Status != http.StatusBadRequest || !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("put %q: %v, want invalid_spec (400)", w.Name, err)
			}
		}
		if _, err := d.client.Get(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("get of an unknown workload: %v, want not found", err)
		}
	})

	t.Run("program that does not exist", func(t *testing.T) {
		file := d.writeSpec(t, "ghost.yaml", "name: ghost\ncommand: [/nonexistent/prog, x]\nrestart: {backoff: {initial: 50ms}}\n")
		_, errOut, code := runCLI(t, d.socket, "apply", "-f", file)
		if code != 1 || !strings.Contains(errOut, "/nonexistent/prog") {
			t.Errorf("apply: exit %d, stderr %q; want 1 naming the program", code, errOut)
		}
		w := d.get(t, "ghost")
		if w.State != api.StateFailed || !strings.Contains(w.LastError, "/nonexistent/prog") {
			t.Errorf("state %s, last_error %q; want failed naming the program", w.State, w.LastError)
		}
		time.Sleep(time.Second) // many backoff periods: a restart loop would show
		if w := d.get(t, "ghost"); w.State != api.StateFailed || w.Restarts != 0 {
			t.Errorf("a second later: state %s, restarts %d; want failed, 0 (retrying cannot help)", w.State, w.Restarts)
		}
		if logs := d.logs(t, "ghost"); strings.Count(logs, "flyd: start failed") != 1 || !strings.Contains(logs, "/nonexistent/prog") {
			t.Errorf("log %q, want one start-failed line naming the program", logs)
		}
		d.mustCLI(t, "rm", "ghost")
	})

	t.Run("apply twice, then a change", func(t *testing.T) {
		text := "name: same\ncommand: [\"@PROG@\", print, \"2\"]\n"
		file := d.writeSpec(t, "same.yaml", text)
		d.mustCLI(t, "apply", "-f", file)
		w := d.get(t, "same")
		d.mustCLI(t, "apply", "-f", file)
		ws, err := d.client.List(context.Background())
		if err != nil || len(ws) != 1 || ws[0].PID != w.PID || ws[0].Restarts != 0 || ws[0].State != api.StateRunning {
			t.Errorf("after a second apply: %+v, %v; want one workload, pid %d, not restarted", ws, err, w.PID)
		}
		d.writeSpec(t, "same.yaml", text+"env: {CHANGED: \"yes\"}\n")
		d.mustCLI(t, "apply", "-f", file)
		if w2 := d.get(t, "same"); w2.PID == w.PID || w2.State != api.StateRunning || w2.Spec.Env["CHANGED"] != "yes" {
			t.Errorf("after a changed apply: pid %d (was %d), state %s, env %v; want a new run of the new spec", w2.PID, w.PID, w2.State, w2.Spec.Env)
		}
		if err := reaped(w.PID, d.pid()); err != nil {
			t.Error(err)
		}
		d.mustCLI(t, "rm", "same")
	})

	t.Run("raw HTTP", func(t *testing.T) {
		status, body := rawPut(t, d.socket, "raw", `{"name":"raw","command":["/bin/true"],"comand":["x"]}`)
		if status != http.StatusBadRequest || body.Error == nil || body.Error.Code != "invalid_spec" || !strings.Contains(body.Error.Message, "comand") {
			t.Errorf("unknown JSON field: %d %+v, want 400 invalid_spec naming the field", status, body.Error)
		}
		status, body = rawPut(t, d.socket, "other", `{"name":"raw","command":["/bin/true"]}`)
		if status != http.StatusBadRequest || body.Error == nil || body.Error.Code != "invalid_spec" || body.Error.Field != "name" {
			t.Errorf("a body naming another workload than the path: %d %+v, want 400 invalid_spec on name", status, body.Error)
		}
		huge := `{"name":"raw","command":["` + strings.Repeat("a", api.MaxBodyBytes+1) + `"]}`
		if status, body := rawPut(t, d.socket, "raw", huge); status != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over 1 MiB: %d %+v, want 413", status, body.Error)
		}
		if _, err := d.client.Get(context.Background(), "raw"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a refused PUT created the workload: %v", err)
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{{"logs"}, {"bogus"}, {"apply"}, {"inspect", "a", "b"}, {"ps", "--nope"}} {
			if _, errOut, code := runCLI(t, d.socket, args...); code != 2 || !strings.Contains(errOut, "usage") {
				t.Errorf("flyd %s: exit %d, stderr %q; want exit 2 with usage", strings.Join(args, " "), code, errOut)
			}
		}
	})
}

// rawPut sends body as the spec of name straight over the socket, as any
// program that does not use the Go client would.
func rawPut(t *testing.T, socket, name, body string) (int, api.ErrorBody) {
	t.Helper()
	hc := &http.Client{Timeout: waitFor, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPut, "http://flyd/v1/workloads/"+name, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", name, err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb
}
