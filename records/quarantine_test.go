package records

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/spec"
)

// keptProc is a kept run: alive until killed, unless it ignores kills.
type keptProc struct {
	done     chan struct{}
	deaf     bool
	killed   int
	released bool
}

func newKeptProc() *keptProc { return &keptProc{done: make(chan struct{})} }

func (p *keptProc) State() driver.State             { return driver.State{PID: 77} }
func (p *keptProc) Done() <-chan struct{}           { return p.done }
func (p *keptProc) Exit() driver.Exit               { return driver.Exit{} }
func (p *keptProc) Signal(syscall.Signal) error     { return nil }
func (p *keptProc) SignalMain(syscall.Signal) error { return nil }
func (p *keptProc) Release()                        { p.released = true }
func (p *keptProc) Kill() error {
	p.killed++
	if !p.deaf && p.killed == 1 {
		close(p.done)
	}
	return nil
}

// recoverer is a runtime that answers Recover with proc and err alone.
type recoverer struct {
	driver.Driver
	proc driver.Process
	err  error
}

func (r recoverer) Recover(context.Context, driver.State) (driver.Process, error) {
	return r.proc, r.err
}

func openQuarantine(t *testing.T, names ...string) (*Store, *Quarantine) {
	t.Helper()
	st, err := Open(t.TempDir(), t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	bad := map[string]Bad{}
	for _, n := range names {
		bad[n] = Bad{Err: errors.New(n + " does not parse"), Network: "net-" + n, Owner: n + ".yaml"}
		if err := st.SaveRun(n, Run{Process: driver.State{Driver: spec.KindNative, PID: 100}}); err != nil {
			t.Fatal(err)
		}
	}
	return st, NewQuarantine(st, bad, zap.NewNop())
}

func hasRun(t *testing.T, st *Store, name string) bool {
	t.Helper()
	_, ok, err := st.LoadRun(name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestQuarantineKeepsRuns: a run alive, or one its runtime could not tell,
// is kept with its record and shown with its pid; one known gone leaves
// neither; status, the network plane's view and the sweep's see every
// quarantined name.
func TestQuarantineKeepsRuns(t *testing.T) {
	st, q := openQuarantine(t, "alive", "unknown", "gone")
	run := Run{Process: driver.State{Driver: spec.KindNative, PID: 100}}
	for name, r := range map[string]Recovered{
		"alive":   {Run: run, Proc: newKeptProc()},
		"unknown": {Run: run, Err: errdefs.ErrRuntimeUnavailable},
		"gone":    {Run: run},
	} {
		if kept := q.Keep(name, r); kept != (name != "gone") {
			t.Errorf("Keep(%s) = %v", name, kept)
		}
		if has := hasRun(t, st, name); has != (name != "gone") {
			t.Errorf("the run record of %s there: %v", name, has)
		}
	}
	if err := st.SaveRun("other", run); err != nil {
		t.Fatal(err)
	}
	if q.Keep("other", Recovered{Run: run, Proc: newKeptProc()}) || !hasRun(t, st, "other") {
		t.Fatal("a name not quarantined: its run kept, or its record removed")
	}
	if !q.Has("gone") || q.Has("other") {
		t.Fatal("Has tells quarantined names from others wrong")
	}
	list := q.List()
	if len(list) != 3 || list[0].Name != "alive" || list[0].PID != 100 || list[1].Name != "gone" || list[1].PID != 0 || list[0].Error != "alive does not parse" {
		t.Fatalf("List: %+v", list)
	}
	running := map[string]bool{}
	q.Each(func(name string, bad Bad, r bool) {
		if bad.Network != "net-"+name {
			t.Errorf("%s: network %q", name, bad.Network)
		}
		running[name] = r
	})
	if !running["alive"] || !running["unknown"] || running["gone"] || len(running) != 3 {
		t.Fatalf("Each's running: %v", running)
	}
	if names := q.Names(); len(names) != 3 || names[0] != "alive" {
		t.Fatalf("Names: %v", names)
	}
	q.Lift("gone")
	if q.Has("gone") || len(q.List()) != 2 {
		t.Fatal("a lifted name is still quarantined")
	}
}

// TestQuarantineClaim: one claim of a name at a time, none of a name not
// (or no longer) quarantined; ending the kept run kills it and removes its
// record; removing the name deletes its record and lifts it.
func TestQuarantineClaim(t *testing.T) {
	st, q := openQuarantine(t, "web")
	p := newKeptProc()
	q.Keep("web", Recovered{Run: Run{Process: driver.State{PID: 100}}, Proc: p})
	if n, release, err := q.Claim(context.Background(), "other"); n != nil || err != nil {
		t.Fatalf("claim of a name not quarantined: %v, %v", n, err)
	} else {
		release()
	}
	n, release, err := q.Claim(context.Background(), "web")
	if err != nil || n == nil || n.Bad.Owner != "web.yaml" {
		t.Fatalf("claim: %+v, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := q.Claim(ctx, "web"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second claim while the first holds: %v", err)
	}
	if err := q.EndRun(context.Background(), n, nil); err != nil {
		t.Fatal(err)
	}
	if p.killed != 1 || hasRun(t, st, "web") || q.List()[0].PID != 0 {
		t.Fatalf("the kept run: killed %d times, record there %v, pid shown %d", p.killed, hasRun(t, st, "web"), q.List()[0].PID)
	}
	if err := q.Remove(n); err != nil {
		t.Fatal(err)
	}
	release()
	if q.Has("web") {
		t.Fatal("a removed name is still quarantined")
	}
	if n, _, err := q.Claim(context.Background(), "web"); n != nil || err != nil {
		t.Fatalf("claim of a lifted name: %v, %v", n, err)
	}
}

// TestQuarantineEndRunAsksAgain: a run whose runtime did not answer at
// start is asked about again; it is ended only when that runtime is there
// and answers, and is gone or killed.
func TestQuarantineEndRunAsksAgain(t *testing.T) {
	unknown := Recovered{Run: Run{Process: driver.State{Driver: spec.KindNative, PID: 100}}, Err: errdefs.ErrRuntimeUnavailable}
	for _, c := range []struct {
		name    string
		drivers map[spec.Kind]driver.Driver
		want    error
		ended   bool
	}{
		{"no runtime", nil, errdefs.ErrRuntimeUnavailable, false},
		{"runtime down", map[spec.Kind]driver.Driver{spec.KindNative: recoverer{err: errors.New("down")}}, errdefs.ErrRuntimeUnavailable, false},
		{"run gone", map[spec.Kind]driver.Driver{spec.KindNative: recoverer{err: errdefs.ErrNotFound}}, nil, true},
		{"run alive", map[spec.Kind]driver.Driver{spec.KindNative: recoverer{proc: newKeptProc()}}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, q := openQuarantine(t, "web")
			q.Keep("web", unknown)
			n, release, _ := q.Claim(context.Background(), "web")
			defer release()
			if err := q.EndRun(context.Background(), n, c.drivers); !errors.Is(err, c.want) || (err != nil) == (c.want == nil) {
				t.Fatalf("EndRun: %v; want %v", err, c.want)
			}
			if hasRun(t, st, "web") == c.ended {
				t.Fatalf("the run record there after EndRun: %v", !c.ended)
			}
		})
	}
}

// TestQuarantineRelease: a daemon that exits lets go of the kept runs
// without ending them.
func TestQuarantineRelease(t *testing.T) {
	_, q := openQuarantine(t, "web", "db")
	p := newKeptProc()
	q.Keep("web", Recovered{Proc: p})
	q.Release()
	if !p.released || p.killed != 0 {
		t.Fatalf("released %v, killed %d", p.released, p.killed)
	}
}
