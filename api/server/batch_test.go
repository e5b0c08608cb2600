package server_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

func sleeper(name string, after ...string) *spec.Workload {
	return &spec.Workload{Name: name, Command: []string{"/bin/sleep", "100"}, After: after}
}

// TestBatchLifecycle applies a dependency chain and an independent
// workload in one batch, then stops, starts and removes them in batches:
// every result says what became of its workload, and the processes are
// really gone after the stop.
func TestBatchLifecycle(t *testing.T) {
	c, _ := serve(t, allowAll)
	ctx := context.Background()
	rs, err := c.ApplyBatch(ctx, []*spec.Workload{sleeper("web", "db"), sleeper("db"), sleeper("cache")}, api.ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rs); got != "cache db web" {
		t.Fatalf("results in order %q, want dependencies first: cache db web", got)
	}
	pids := map[string]int{}
	for _, r := range rs {
		if r.Err() != nil || r.State != api.StateRunning || r.PID == 0 {
			t.Fatalf("apply result %+v, want running with a pid", r)
		}
		pids[r.Name] = r.PID
	}

	rs, err = c.Batch(ctx, api.ActionStop, api.Batch{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rs); got != "cache db web" {
		t.Fatalf("stop --all acted on %q", got)
	}
	for _, r := range rs {
		if r.Err() != nil || r.State != api.StateStopped || r.PID != 0 {
			t.Fatalf("stop result %+v, want stopped without a pid", r)
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pids[r.Name])); err == nil && !zombie(pids[r.Name]) {
			t.Fatalf("%s's process %d outlived its stop", r.Name, pids[r.Name])
		}
	}

	// Unknown names fail alone; the others are started.
	rs, err = c.Batch(ctx, api.ActionStart, api.Batch{Names: []string{"db", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err() != nil || rs[0].State != api.StateRunning {
		t.Fatalf("start db: %+v", rs[0])
	}
	if !errors.Is(rs[1].Err(), errdefs.ErrNotFound) {
		t.Fatalf("start nope: %v, want not_found", rs[1].Err())
	}

	rs, err = c.Batch(ctx, api.ActionRemove, api.Batch{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err() != nil {
			t.Fatalf("remove %s: %v", r.Name, r.Err())
		}
	}
	if ws, _ := c.List(ctx); len(ws) != 0 {
		t.Fatalf("%d workloads left after remove --all", len(ws))
	}
}

// TestBatchOutcomesAreSeparate: a spec the daemon refuses fails alone,
// and the rest of the batch is applied.
func TestBatchOutcomesAreSeparate(t *testing.T) {
	c, _ := serve(t, allowAll)
	ctx := context.Background()
	nix := &spec.Workload{Name: "flake", Kind: spec.KindNix, Command: []string{"hello"}, Nix: &spec.Nix{Flake: "path:/x"}}
	rs, err := c.ApplyBatch(ctx, []*spec.Workload{sleeper("a"), nix}, api.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.Result{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	if r := byName["a"]; r.Err() != nil || r.State != api.StateStopped {
		t.Fatalf("a: %+v, want applied and not started", r)
	}
	if err := byName["flake"].Err(); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Fatalf("flake: %v, want runtime_unavailable", err)
	}
}

// TestBatchLargerThanOneBody: specs whose sum is over the body limit are
// sent in several requests, and all of them are applied.
func TestBatchLargerThanOneBody(t *testing.T) {
	c, _ := serve(t, allowAll)
	ctx := context.Background()
	var specs []*spec.Workload
	for i := range 40 {
		w := sleeper("big-" + strconv.Itoa(i))
		w.Env = map[string]string{"BLOB": strings.Repeat("x", 40<<10)}
		specs = append(specs, w)
	}
	rs, err := c.ApplyBatch(ctx, specs, api.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(specs) {
		t.Fatalf("%d results for %d specs", len(rs), len(specs))
	}
	for _, r := range rs {
		if r.Err() != nil {
			t.Fatalf("%s: %v", r.Name, r.Err())
		}
	}
	if ws, _ := c.List(ctx); len(ws) != len(specs) {
		t.Fatalf("%d workloads, want %d", len(ws), len(specs))
	}
}

func names(rs []api.Result) string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Name)
	}
	return strings.Join(ns, " ")
}

// zombie reports whether pid is a zombie: exited, waiting to be reaped
// by a parent that is not this test's business.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// TestBatchRefusedWhole: a name given twice refuses the batch before
// anything is applied, even one the client would split.
func TestBatchRefusedWhole(t *testing.T) {
	c, _ := serve(t, allowAll)
	ctx := context.Background()
	_, err := c.ApplyBatch(ctx, []*spec.Workload{sleeper("a"), sleeper("b"), sleeper("a")}, api.ApplyOptions{})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `"a" is defined twice`) {
		t.Fatalf("batch naming a twice: %v, want invalid naming it", err)
	}
	if ws, _ := c.List(ctx); len(ws) != 0 {
		t.Fatalf("%d workloads applied from a refused batch", len(ws))
	}
}
