package supervisor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/authz"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/registrar"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestLanes: a confined caller may use a network of its own, or one root
// opened to peers, and no other; it holds a share of ports; it acts only on
// what it applied.
func TestLanes(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	put := func(name, network string, by uint32, endpoints int) error {
		w := fakeSpec(name, "stubborn")
		w.Network = spec.NetworkHost
		if network != "" {
			w.Network = network
		}
		for i := range endpoints {
			w.Endpoints = append(w.Endpoints, spec.Endpoint{Name: "e" + itoa(i), Port: spec.Port{Mode: spec.PortEphemeral}})
		}
		_, err := s.Apply(ctx, w, ApplyOptions{By: by, Confined: by != 0})
		return err
	}
	if err := put("root-w", "", 0, 0); err != nil {
		t.Fatal(err)
	}
	forbidden := func(what, says string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want forbidden: %s", what, err, says)
		}
	}
	forbidden("replacing root's", "applied by uid 0", put("root-w", "", 1000, 0))
	if err := put("mine", "", 1000, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stop(authz.WithCaller(ctx, authz.Caller{UID: 1001, Confined: true}), "mine")
	forbidden("another peer's stop", "applied by uid 1000", err)
	if _, err := s.Stop(authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true}), "mine"); err != nil {
		t.Errorf("its own stop: %v", err)
	}
	forbidden("another peer's remove", "applied by uid 1000", s.Remove(ctx, "mine", RemoveOptions{By: 1001, Confined: true}))
	forbidden("more ports than its share", "holds at most 256", put("greedy", "", 1000, maxPeerPorts+1))
	outs, err := s.Batch(authz.WithCaller(ctx, authz.Caller{UID: 1000, Confined: true}), ActionStop, BatchRequest{All: true})
	if err != nil || len(outs) != 1 || outs[0].Name != "mine" {
		t.Errorf("stop --all of a peer: %+v, %v; want its own workload alone", outs, err)
	}
}

// TestPortsHeld: a published endpoint holds two ports, its own and the
// host's, as a spec asking for it is counted.
func TestPortsHeld(t *testing.T) {
	ports := []status.PortMapping{{Endpoint: "a", Port: 18080}, {Endpoint: "b", Port: 18081, Published: 28081}, {Endpoint: "c", Port: 18082}}
	if got := portsHeld(ports); got != 4 {
		t.Errorf("portsHeld = %d, want 4", got)
	}
	if got := portsHeld(nil); got != 0 {
		t.Errorf("portsHeld(nil) = %d", got)
	}
}

// TestInstances: the registry is given nothing of a workload that does
// not run, and an instance an endpoint of one that does, healthy without
// a check.
func TestInstances(t *testing.T) {
	s := &Supervisor{host: registrar.Host{Name: "h1", Advertise: "192.0.2.7"}}
	w := &spec.Workload{Name: "api", Kind: spec.KindNative}
	ports := []status.PortMapping{{Endpoint: "http", API: "http", Port: 18081, Network: spec.NetworkHost}}
	if ins := s.instances(w, ports, status.Stopped); ins != nil {
		t.Errorf("a stopped workload's instances: %v", ins)
	}
	if ins := s.instances(w, ports, status.Running); len(ins) != 1 || !ins[0].Healthy || ins[0].ID != "flyd-h1-api-http" {
		t.Errorf("a running workload's instances: %+v", ins)
	}
}

// TestApplyAllInOrder: a batch is applied dependencies first, whatever its
// order, and a cycle refuses all of it before anything is applied.
func TestApplyAllInOrder(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	app, db := fakeSpec("app", "stubborn"), fakeSpec("db", "stubborn")
	app.After = []string{"db"}
	outs, err := s.ApplyAll(ctx, []Change{{Spec: app, Options: ApplyOptions{Start: true}}, {Spec: db, Options: ApplyOptions{Start: true}}})
	if err != nil || len(outs) != 2 || outs[0].Name != "db" || outs[1].Name != "app" || outs[0].Err != nil || outs[1].Err != nil {
		t.Fatalf("outcomes %+v, %v; want db then app", outs, err)
	}
	x, y := fakeSpec("x", "stubborn"), fakeSpec("y", "stubborn")
	x.After, y.After = []string{"y"}, []string{"x"}
	if _, err := s.ApplyAll(ctx, []Change{{Spec: x}, {Spec: y}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("a cycle: %v; want refused", err)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused batch applied x: %v", err)
	}
}

// TestApplyAllProjectsOncePerLevel: a level of workloads with endpoints
// has its ports reserved first and the rules their declarations change
// projected once for all of them, before any starts; a spec refused in
// the first step holds no port.
func TestApplyAllProjectsOncePerLevel(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	var changes []Change
	for i := range 12 {
		w := fakeSpec("svc"+itoa(i), "run")
		w.Endpoints = []spec.Endpoint{{Name: "http", API: "http", Port: spec.Port{Mode: spec.PortEphemeral}}}
		changes = append(changes, Change{Spec: w, Options: ApplyOptions{Start: true}})
	}
	bad := fakeSpec("bad", "run")
	bad.Endpoints = []spec.Endpoint{{Name: "http", API: "http", Port: spec.Port{Mode: spec.PortEphemeral}}}
	bad.After = []string{"nobody"}
	changes = append(changes, Change{Spec: bad, Options: ApplyOptions{Start: true}})
	before := s.net.Projections()
	outs, err := s.ApplyAll(ctx, changes)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		switch {
		case o.Name == "bad" && o.Err == nil:
			t.Errorf("bad, after a workload that does not exist, was applied")
		case o.Name != "bad" && (o.Err != nil || o.Workload == nil || o.Workload.State != status.Running):
			t.Errorf("%s: %+v, %v; want running", o.Name, o.Workload, o.Err)
		}
	}
	if got := s.net.Projections() - before; got != 1 {
		t.Errorf("a level of 12 new endpoints projected %d times; want once", got)
	}
	ports := s.Ports(ctx)
	if len(ports) != 12 || slices.ContainsFunc(ports, func(p status.PortMapping) bool { return p.Workload == "bad" }) {
		t.Errorf("ports %+v; want one each for the 12, none for bad", ports)
	}
	// Applied again unchanged, no rules are pending.
	before = s.net.Projections()
	if _, err := s.ApplyAll(ctx, changes[:12]); err != nil {
		t.Fatal(err)
	}
	if got := s.net.Projections() - before; got != 0 {
		t.Errorf("an unchanged batch projected %d times", got)
	}
}

// TestRestartReloadAndReadings: restart ends the run and starts another;
// reload by signal reaches the running program and is an event; the
// readings (ports, stats) answer without a kernel's network or cgroups.
func TestRestartReloadAndReadings(t *testing.T) {
	s := openFake(t, newFakeDriver())
	defer shut(s)
	ctx := context.Background()
	w := fakeSpec("svc", "run")
	w.Reload = &spec.Reload{Signal: "SIGHUP"}
	w.Endpoints = []spec.Endpoint{{Name: "http", API: "http", Port: spec.Port{Mode: spec.PortEphemeral}}}
	first, err := s.Apply(ctx, w, ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Restart(ctx, "svc")
	if err != nil || again.PID == first.PID || again.State != status.Running {
		t.Fatalf("restart: %+v, %v; want another run", again, err)
	}
	if _, err := s.Reload(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	reloaded := false
	s.events.Replay(0, s.events.Last(), func(ev status.Event) bool {
		reloaded = reloaded || ev.Type == status.EventReload && ev.Message == "reloaded by signal SIGHUP"
		return true
	})
	if !reloaded {
		t.Error("no reload event")
	}
	if _, err := s.Reload(ctx, "nobody"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("reload of nothing: %v", err)
	}
	if ps := s.Ports(ctx); len(ps) != 1 || ps[0].Workload != "svc" || ps[0].Port == 0 {
		t.Errorf("ports %+v", ps)
	}
}
