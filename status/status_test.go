package status

import (
	"testing"
	"time"
)

// TestSamePorts: an allocation is the same when each endpoint keeps its
// port and its published port, whatever else its mapping says.
func TestSamePorts(t *testing.T) {
	a := []PortMapping{{Endpoint: "http", Port: 8080, Published: 80}, {Endpoint: "admin", Port: 9000}}
	same := []PortMapping{{Endpoint: "http", Port: 8080, Published: 80, Network: "n"}, {Endpoint: "admin", Port: 9000, API: "http"}}
	if !SamePorts(a, same) || !SamePorts(nil, nil) {
		t.Error("the same allocation told apart")
	}
	for _, b := range [][]PortMapping{
		a[:1],
		{{Endpoint: "http", Port: 8081, Published: 80}, a[1]},
		{{Endpoint: "http", Port: 8080}, a[1]},
		{{Endpoint: "web", Port: 8080, Published: 80}, a[1]},
	} {
		if SamePorts(a, b) {
			t.Errorf("%+v taken for %+v", b, a)
		}
	}
}

// TestReadiness: a workload with a health check is up once the check has
// passed, never because it ran for Settle while the check had not spoken.
func TestReadiness(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	yes, no := true, false

	for _, c := range []struct {
		name string
		w    Workload
		up   bool
	}{
		{"no check, running for an hour", Workload{State: Running, StartedAt: &long}, true},
		{"no check, just started", Workload{State: Running, StartedAt: ptr(time.Now())}, false},
		{"a check that has not reported", Workload{State: Running, StartedAt: &long, Checked: true}, false},
		{"a check that passed", Workload{State: Running, StartedAt: &long, Checked: true, Healthy: &yes}, true},
		{"a check that failed", Workload{State: Running, StartedAt: &long, Checked: true, Healthy: &no}, false},
		{"disabled, at rest", Workload{State: Stopped, Disabled: true}, true},
		{"stopped", Workload{State: Stopped}, false},
	} {
		if up, _ := c.w.Readiness(time.Now()); up != c.up {
			t.Errorf("%s: up %v, want %v", c.name, up, c.up)
		}
	}
}

func ptr[T any](v T) *T { return &v }
