package supervisor

import (
	"context"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/carriers"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/wiring"
)

// TestUsesAsCodeflyGivesThem: what a consumer's `uses` and references give
// it follow codefly: an HTTP-based endpoint's address is a URL, a use that
// names no endpoint takes those it may reach and drops the private ones of
// another module, one that names a private endpoint is refused at apply,
// and a reference by API chooses among what the consumer may reach.
func TestUsesAsCodeflyGivesThem(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	billing := fakeSpec("billing", "stubborn")
	billing.Identity = &spec.Identity{Module: "billing"}
	billing.Endpoints = []spec.Endpoint{
		{Name: "admin", API: "grpc", Port: spec.Port{Mode: spec.PortEphemeral}, Visibility: spec.VisibilityPrivate},
		{Name: "rpc", API: "grpc", Port: spec.Port{Mode: spec.PortEphemeral}},
		{Name: "web", API: "connect", Port: spec.Port{Mode: spec.PortEphemeral}},
	}
	if _, err := s.Apply(ctx, billing, ApplyOptions{Start: false}); err != nil {
		t.Fatal(err)
	}
	front := fakeSpec("front", "stubborn")
	front.Uses = []string{"billing"}
	_, vars, err := s.wire(front, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vars["CODEFLY__ENDPOINT__BILLING__BILLING__ADMIN__GRPC"]; ok || len(vars) != 2 {
		t.Errorf("front's uses of billing: %v; want rpc and web, not the private admin", vars)
	}
	if v := vars["CODEFLY__ENDPOINT__BILLING__BILLING__WEB__CONNECT"]; !strings.HasPrefix(v, "http://localhost:") {
		t.Errorf("a connect endpoint's address %q; want a URL", v)
	}
	if v := vars["CODEFLY__ENDPOINT__BILLING__BILLING__RPC__GRPC"]; !strings.HasPrefix(v, "localhost:") {
		t.Errorf("a grpc endpoint's address %q; want host:port", v)
	}

	named := fakeSpec("named", "stubborn")
	named.Uses = []string{"billing/admin"}
	if _, err := s.Apply(ctx, named, ApplyOptions{Start: false}); err == nil || !strings.Contains(err.Error(), "uses[0]: endpoint admin of billing is private to module") {
		t.Errorf("a use of a private endpoint of another module: %v; want refused at apply, naming it", err)
	}

	ref := fakeSpec("ref", "stubborn")
	ref.Env = map[string]string{"RPC": "${endpoint:billing/billing/grpc}"}
	resolved, _, err := s.wire(ref, 0, false)
	if err != nil {
		t.Fatalf("a reference by API with one reachable grpc endpoint: %v", err)
	}
	if want := s.mustPort(t, "billing", "rpc"); resolved.Env["RPC"] != "localhost:"+want {
		t.Errorf("RPC=%q; want billing's rpc, localhost:%s", resolved.Env["RPC"], want)
	}
}

// mustPort is a workload's endpoint's port, as a string.
func (s *Supervisor) mustPort(t *testing.T, name, endpoint string) string {
	t.Helper()
	w, err := s.lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.snapshot(false).Ports {
		if p.Endpoint == endpoint {
			return itoa(p.Port)
		}
	}
	t.Fatalf("%s has no endpoint %s", name, endpoint)
	return ""
}

// TestConfigurationsAsCodeflyGivesThem: a service gets its own
// configurations, and those of every workload it uses, under codefly's
// names, secrets with their values (not the redacted ones inspect shows).
func TestConfigurationsAsCodeflyGivesThem(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	pg := fakeSpec("pg", "stubborn")
	pg.Identity = &spec.Identity{Module: "store", Service: "pg-main"}
	pg.Configuration = spec.Configurations{"connection": {"host": "localhost"}}
	pg.SecretConfiguration = spec.Configurations{"connection": {"pass-word": "hunter2"}}
	if _, err := s.Apply(ctx, pg, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	app := fakeSpec("app", "stubborn")
	app.Uses = []string{"pg"}
	app.Configuration = spec.Configurations{"feature": {"on": "yes"}}
	_, used, err := s.wire(app, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := wiring.PlanRun(app, "native", nil, used)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"CODEFLY__SERVICE_CONFIGURATION__STORE__PG_MAIN__CONNECTION__HOST":             "localhost",
		"CODEFLY__SERVICE_SECRET_CONFIGURATION__STORE__PG_MAIN__CONNECTION__PASS_WORD": "hunter2",
		"CODEFLY__SERVICE_CONFIGURATION__APP__APP__FEATURE__ON":                        "yes",
	} {
		if v, _ := carriers.LookupEnv(pl.Env, key); v != want {
			t.Errorf("%s=%q; want %q", key, v, want)
		}
	}
}
