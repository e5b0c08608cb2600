package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestMetrics: /metrics on the socket speaks Prometheus text and counts
// what the daemon does.
func TestMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustCLI(t, "apply", "-f", d.writeSpec(t, "m.yaml", "name: m\ncommand: [\"@PROG@\", \"print\", \"1\"]\nendpoints: [{name: http, port: ephemeral}]\n"))
	d.waitState(t, "m", api.StateRunning)
	b := []byte(d.metrics(t))
	text := string(b)
	for _, want := range []string{
		`flyd_workloads{state="running"} 1`,
		`flyd_workload_restarts_total{workload="m"} 0`,
		`flyd_port_allocations{network="host"} 1`,
		`flyd_api_requests_total{code="200",route="POST /v1/batch/apply"} 1`,
		`flyd_registry_instances{kind="desired"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// metrics is the daemon's /metrics text.
func (d *daemon) metrics(t *testing.T) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://flyd/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
