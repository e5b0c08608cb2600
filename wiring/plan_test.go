package wiring

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestOwnEndpointsAsCodeflyGivesThem: a service finds its own endpoints
// under codefly's names, where it serves them, and its environment and
// version.
func TestOwnEndpointsAsCodeflyGivesThem(t *testing.T) {
	w := &spec.Workload{Name: "api", Command: []string{"/bin/true"}}
	w.Identity = &spec.Identity{Module: "shop", Service: "api", Version: "1.4.2"}
	ports := []status.PortMapping{{Endpoint: "http", API: "http", Port: 18081}, {Endpoint: "grpc", API: "grpc", Port: 18083}}
	pl, err := PlanRun(w, "native", ports, nil)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"CODEFLY__ENDPOINT__SHOP__API__HTTP__HTTP": "http://localhost:18081",
		"CODEFLY__ENDPOINT__SHOP__API__GRPC__GRPC": "localhost:18083",
		"CODEFLY__ENVIRONMENT":                     "local",
		"CODEFLY__SERVICE_VERSION":                 "1.4.2",
	} {
		if v, _ := carriers.LookupEnv(pl.Env, key); v != want {
			t.Errorf("%s=%q; want %q", key, v, want)
		}
	}
}

// TestPlanCommand: a command's ${PORT_X} and ${ADDR_X} are the run's own
// endpoint's, one that names no endpoint is refused with its place, and a
// project is told; a plan whose environment exec would refuse is refused.
func TestPlanCommand(t *testing.T) {
	ports := []status.PortMapping{{Endpoint: "http", API: "http", Port: 18081}}
	tests := []struct {
		name    string
		command []string
		project string
		want    []string
		err     string
	}{
		{"port and address", []string{"serve", "--port=${PORT_HTTP}", "--on", "${ADDR_HTTP}"}, "", []string{"serve", "--port=18081", "--on", "localhost:18081"}, ""},
		{"no such endpoint", []string{"serve", "${PORT_GRPC}"}, "", nil, "command[1]: ${PORT_GRPC} names no endpoint of this workload"},
		{"in a project", []string{"serve"}, "ci-7", []string{"serve"}, ""},
	}
	for _, tt := range tests {
		w := &spec.Workload{Name: "api", Project: tt.project, Command: tt.command}
		pl, err := PlanRun(w, "native", ports, nil)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: %v; want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if strings.Join(pl.Args, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: args %q; want %q", tt.name, pl.Args, tt.want)
		}
		if v, _ := carriers.LookupEnv(pl.Env, "FLYD_PROJECT"); v != tt.project {
			t.Errorf("%s: FLYD_PROJECT=%q; want %q", tt.name, v, tt.project)
		}
	}

	// The commands run beside the run take the same placeholders, and a
	// placeholder of no endpoint in one is refused with its field.
	w := &spec.Workload{Name: "api", Command: []string{"serve"}, Stop: spec.Stop{Exec: []string{"cli", "-p", "${PORT_HTTP}", "stop"}}}
	pl, err := PlanRun(w, "native", ports, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pl.Expand("stop.exec", w.Stop.Exec); err != nil || strings.Join(got, " ") != "cli -p 18081 stop" {
		t.Errorf("stop.exec expanded to %q, %v", got, err)
	}
	for _, bad := range []*spec.Workload{
		{Name: "api", Command: []string{"serve"}, Stop: spec.Stop{Exec: []string{"cli", "${PORT_GRPC}"}}},
		{Name: "api", Command: []string{"serve"}, Reload: &spec.Reload{Exec: []string{"cli", "${ADDR_GRPC}"}}},
		{Name: "api", Command: []string{"serve"}, Health: &spec.Health{Exec: []string{"probe", "${PORT_GRPC}"}}},
		{Name: "api", Command: []string{"serve"}, Watch: []spec.Watch{{Path: "/srv", Action: spec.WatchExec, Exec: []string{"make", "${PORT_GRPC}"}}}},
	} {
		if _, err := PlanRun(bad, "native", ports, nil); err == nil || !strings.Contains(err.Error(), "names no endpoint of this workload") {
			t.Errorf("a placeholder of no endpoint in %+v: %v", bad, err)
		}
	}

	big := &spec.Workload{Name: "big", Command: []string{"/bin/true"}, Env: map[string]string{"HUGE": strings.Repeat("x", 200<<10)}}
	pl, err = PlanRun(big, "native", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Check(t.TempDir()); err == nil || !strings.Contains(err.Error(), "HUGE") {
		t.Errorf("a variable longer than exec takes: %v; want refused, naming it", err)
	}
}

// TestCommandEnv: a command beside the run gets the inline variables and
// those by file through the run's carrier files; without a run's files,
// what goes by file refuses the command rather than be dropped.
func TestCommandEnv(t *testing.T) {
	inline := &Plan{Env: []string{"A=1"}}
	if env, err := inline.CommandEnv(""); err != nil || !slices.Equal(env, []string{"A=1"}) {
		t.Fatalf("inline alone: %v, %v", env, err)
	}
	byFile := &Plan{Env: []string{"A=1"}, Files: []carriers.File{{Key: "CODEFLY__BIG", Value: "x"}}}
	env, err := byFile.CommandEnv("/run/flyd/carriers/web.01")
	if err != nil || !slices.Equal(env, append([]string{"A=1"}, carriers.Pointers("/run/flyd/carriers/web.01", byFile.Files)...)) {
		t.Fatalf("by file: %v, %v", env, err)
	}
	if len(byFile.Env) != 1 {
		t.Fatalf("the plan's own environment changed: %v", byFile.Env)
	}
	if _, err := byFile.CommandEnv(""); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "CODEFLY__BIG") {
		t.Fatalf("by file without a run's files: %v", err)
	}
}
