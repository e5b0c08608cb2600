package driver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// runtime is a driver of one kind with the optional parts a test sets:
// an answer to Available, volumes, sweeps that fail a number of times.
type runtime struct {
	Driver
	kind    spec.Kind
	down    error
	volumes []string
	forgot  []string

	mu         sync.Mutex
	sweepFails int
	swept      []map[string]bool
}

func (r *runtime) Kind() spec.Kind { return r.kind }
func (r *runtime) Capabilities() Capabilities {
	return Capabilities{RuntimeContext: "ctx-" + string(r.kind)}
}

// Recover finds the run of pid 1 alive, none of pid 2, and cannot tell
// of any other.
func (r *runtime) Recover(ctx context.Context, st State) (Process, error) {
	switch st.PID {
	case 1:
		return alive{}, nil
	case 2:
		return nil, errdefs.ErrNotFound
	}
	return nil, errdefs.ErrRuntimeUnavailable
}

// alive is a run a runtime recovered.
type alive struct{ Process }

type prober struct{ *runtime }

func (p prober) Available(context.Context) error { return p.down }

type keeper struct{ *runtime }

func (k keeper) Volumes(project string) ([]string, error) { return k.volumes, nil }
func (k keeper) RemoveVolumes(ctx context.Context, project string) ([]string, error) {
	return k.volumes, errors.New("one in use")
}
func (k keeper) Forget(ctx context.Context, workload string) error {
	k.forgot = append(k.forgot, workload)
	return nil
}
func (k keeper) Sweep(ctx context.Context, keep map[string]bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.swept = append(k.swept, keep)
	if len(k.swept) <= k.sweepFails {
		return errdefs.ErrRuntimeUnavailable
	}
	return nil
}

// TestRuntimesAnswerForAll: which kinds can run, their capabilities, and
// the volumes of the runtimes that keep them.
func TestRuntimesAnswerForAll(t *testing.T) {
	native := &runtime{kind: spec.KindNative}
	ctr := &runtime{kind: spec.KindContainerd, down: errdefs.ErrRuntimeUnavailable, volumes: []string{"p.data"}}
	rs := NewRuntimes([]Driver{native, prober{ctr}})
	rs[spec.KindNix] = keeper{&runtime{kind: spec.KindNix, volumes: []string{"p.cache"}}}
	if err := rs.Available(context.Background(), spec.KindNative); err != nil {
		t.Fatal(err)
	}
	for _, k := range []spec.Kind{spec.KindContainerd, spec.KindExternal} {
		if err := rs.Available(context.Background(), k); !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if got := rs.Availability(context.Background()); len(got) != len(spec.Kinds) || !got["native"] || !got["nix"] || got["containerd"] || got["external"] {
		t.Fatalf("availability %v", got)
	}
	if c := rs.Capabilities(spec.KindNative); c.RuntimeContext != "ctx-native" {
		t.Fatalf("capabilities of a runtime: %+v", c)
	}
	if c := rs.Capabilities(spec.KindExternal); c.RuntimeContext != "external" {
		t.Fatalf("capabilities of a kind without a runtime: %+v", c)
	}
	if names, err := rs.Volumes("p"); err != nil || !slices.Equal(names, []string{"p.cache"}) {
		t.Fatalf("volumes: %v, %v", names, err)
	}
	if names, err := rs.RemoveVolumes(context.Background(), "p"); err == nil || !slices.Equal(names, []string{"p.cache"}) {
		t.Fatalf("removed volumes: %v, %v", names, err)
	}
	nix := rs[spec.KindNix].(keeper)
	if err := rs.Forget(context.Background(), spec.KindNix, "web"); err != nil || !slices.Equal(nix.forgot, []string{"web"}) {
		t.Fatalf("forget: %v, %v", nix.forgot, err)
	}
	if err := rs.Forget(context.Background(), spec.KindNative, "web"); err != nil {
		t.Fatal(err)
	}
}

// TestRuntimesSweep: a runtime that answers is swept at once with keep;
// one that does not is retried, with what later gives, until it answers;
// ending ctx ends the retries.
func TestRuntimesSweep(t *testing.T) {
	up := keeper{&runtime{kind: spec.KindNix}}
	down := keeper{&runtime{kind: spec.KindContainerd, sweepFails: 2}}
	rs := Runtimes{spec.KindNix: up, spec.KindContainerd: down, spec.KindNative: &runtime{kind: spec.KindNative}}
	var mu sync.Mutex
	var reports []string
	done := rs.Sweep(context.Background(), map[string]bool{"a": true}, func() map[string]bool { return map[string]bool{"b": true} },
		func(int) time.Duration { return time.Millisecond },
		func(k spec.Kind, n int, err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, string(k)+map[bool]string{true: " swept", false: " failed"}[err == nil])
		})
	if len(up.swept) != 1 || !up.swept[0]["a"] {
		t.Fatalf("the runtime that answers: swept %v", up.swept)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the retries never ended")
	}
	if len(down.swept) != 3 || !down.swept[0]["a"] || !down.swept[2]["b"] {
		t.Fatalf("the runtime that did not answer: swept %v", down.swept)
	}
	if want := []string{"containerd failed", "containerd failed", "containerd swept"}; !slices.Equal(reports, want) {
		t.Fatalf("reports %v; want %v", reports, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	never := keeper{&runtime{kind: spec.KindContainerd, sweepFails: 1 << 30}}
	done = Runtimes{spec.KindContainerd: never}.Sweep(ctx, nil, func() map[string]bool { return nil },
		func(int) time.Duration { return time.Hour }, func(spec.Kind, int, error) {})
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the retries outlived their context")
	}
}

// TestRuntimesRecover: a recorded run is its runtime's to find: alive, or
// gone (not found, or of a runtime this daemon has not), or not known
// while its runtime does not answer.
func TestRuntimesRecover(t *testing.T) {
	rs := NewRuntimes([]Driver{&runtime{kind: spec.KindNative}})
	ctx := context.Background()
	if p, err := rs.Recover(ctx, State{Driver: spec.KindNative, PID: 1}); err != nil || p == nil {
		t.Errorf("a live run: %v, %v", p, err)
	}
	for _, st := range []State{{Driver: spec.KindNative, PID: 2}, {Driver: spec.KindNix, PID: 1}} {
		if p, err := rs.Recover(ctx, st); err != nil || p != nil {
			t.Errorf("%+v, gone: %v, %v", st, p, err)
		}
	}
	if p, err := rs.Recover(ctx, State{Driver: spec.KindNative, PID: 3}); !errors.Is(err, errdefs.ErrRuntimeUnavailable) || p != nil {
		t.Errorf("a runtime that cannot tell: %v, %v", p, err)
	}
}
