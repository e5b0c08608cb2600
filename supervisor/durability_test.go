package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// freePort is a loopback TCP port nothing listens on right now.
var freePort = testenv.FreePort

// TestFullDiskApplyLeavesNoTrace: an apply whose desired state cannot be
// written says so, holds no port, and never comes back: not after space
// is freed, the journal compacted and the daemon restarted.
func TestFullDiskApplyLeavesNoTrace(t *testing.T) {
	fs := testenv.SmallDisk(t, 8<<20)
	d := dirs{state: filepath.Join(fs, "state"), run: filepath.Join(t.TempDir(), "run")}
	ctx := context.Background()
	s := open(t, d, true)
	defer func() { shut(s) }()

	port := freePort(t)
	withPort := func(name string) *spec.Workload {
		w := shSpec(name, "exec sleep 100")
		w.Endpoints = []spec.Endpoint{{Name: "http", Port: spec.FixedPort(port)}}
		return w
	}
	filler := filepath.Join(fs, "filler")
	testenv.FillDisk(t, filler)
	_, err := s.Apply(ctx, withPort("lost"), ApplyOptions{Start: false})
	if err == nil || !strings.Contains(err.Error(), "cannot record workload lost") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("apply on a full disk: %v; want it refused for want of space", err)
	}
	if _, err := s.Get(ctx, "lost"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the refused workload exists: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// Its port is free: another workload takes it.
	if _, err := s.Apply(ctx, withPort("taker"), ApplyOptions{Start: false}); err != nil {
		t.Fatalf("the refused workload's port is still held: %v", err)
	}
	// Over 1 MiB of changes, so that the journal compacts while this
	// supervisor runs.
	for i := range 12 {
		w := shSpec("churn", "exec sleep 100")
		w.Env = map[string]string{"BIG": fmt.Sprint(i, strings.Repeat("x", 100<<10))}
		if _, err := s.Apply(ctx, w, ApplyOptions{Start: false}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove(ctx, "churn", RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.state, "workloads.journal", "snapshot.json")); err != nil {
		t.Fatalf("the journal did not compact: %v", err)
	}
	shut(s)
	s = open(t, d, true)
	list := s.List(ctx)
	if len(list) != 1 || list[0].Name != "taker" {
		t.Fatalf("workloads after a restart: %+v; want taker alone", list)
	}
}

// invalidate makes a stored record one that no longer validates, as a
// daemon upgraded to stricter rules would find it, while no supervisor
// runs.
func invalidate(t *testing.T, d dirs, name string) {
	t.Helper()
	j, recs, err := journal.Open(filepath.Join(d.state, "workloads.journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var r map[string]any
	if err := json.Unmarshal(recs[name], &r); err != nil {
		t.Fatal(err)
	}
	r["spec"].(map[string]any)["command"] = []string{}
	b, _ := json.Marshal(r)
	if err := j.Put(name, b); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantinedRecordKeepsItsRun: a record that does not load is kept
// and reported, and its run is neither killed nor swept, nor is anything
// it owns; applying the name replaces it, once its run is ended, and
// removing the name removes it.
func TestQuarantinedRecordKeepsItsRun(t *testing.T) {
	d := newDirs(t)
	ctx := context.Background()
	s := open(t, d, false)
	pids := map[string]int{}
	for _, name := range []string{"fixed", "removed"} {
		w := shSpec(name, "echo started; exec sleep 100")
		w.Endpoints = []spec.Endpoint{{Name: "http", Port: spec.Port{Mode: spec.PortEphemeral}}}
		w.Env = map[string]string{"CODEFLY__BIG": strings.Repeat("x", 40<<10)} // a file carrier
		got, err := s.Apply(ctx, w, ApplyOptions{Start: true})
		if err != nil {
			t.Fatal(err)
		}
		waitLog(t, s, name, "started")
		pids[name] = got.PID
		t.Cleanup(func() {
			if t.Failed() && alive(got.PID) {
				_ = syscall.Kill(got.PID, syscall.SIGKILL) // left by the failure
			}
		})
	}
	shut(s)
	carriers, _ := filepath.Glob(filepath.Join(d.run, "carriers", "*"))
	if len(carriers) != 2 {
		t.Fatalf("carrier directories %v; want one per run", carriers)
	}
	invalidate(t, d, "fixed")
	invalidate(t, d, "removed")

	core, logs := observer.New(zap.InfoLevel)
	s, err := newSupervisor(Config{StateDir: d.state, RunDir: d.run, Drivers: nativeDrivers(), StopOnClose: true, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { shut(s) }()
	for name, pid := range pids {
		if !alive(pid) {
			t.Fatalf("the run of quarantined %s (pid %d) was killed", name, pid)
		}
		if _, err := s.Get(ctx, name); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("quarantined %s is a workload: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(d.run, "workloads", name+".json")); err != nil {
			t.Fatalf("the run record of quarantined %s is gone: %v", name, err)
		}
		var held bool
		for _, r := range s.net.Reservations() {
			held = held || r.Workload == name
		}
		if !held {
			t.Fatalf("the port of quarantined %s was released", name)
		}
		if n := logs.FilterMessageSnippet("quarantined").FilterField(zap.String("workload", name)).Len(); n != 1 {
			t.Fatalf("%d log lines about quarantined %s; want one: %v", n, name, logs.All())
		}
	}
	for _, c := range carriers {
		if _, err := os.Stat(c); err != nil {
			t.Fatalf("a quarantined run's carrier directory was swept: %v", err)
		}
	}
	st := s.Status(ctx)
	if len(st.Quarantined) != 2 || st.Quarantined[0].Name != "fixed" || st.Quarantined[0].PID != pids["fixed"] ||
		!strings.Contains(st.Quarantined[0].Error, "command") {
		t.Fatalf("status quarantined: %+v; want both, with their pids and why", st.Quarantined)
	}

	// Applied again: the old run ends before the new one starts.
	got, err := s.Apply(ctx, shSpec("fixed", "exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if alive(pids["fixed"]) || got.PID == 0 || got.PID == pids["fixed"] {
		t.Fatalf("apply of a quarantined name: old pid %d alive %v, new pid %d", pids["fixed"], alive(pids["fixed"]), got.PID)
	}
	if err := s.Remove(ctx, "removed", RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if alive(pids["removed"]) {
		t.Fatal("removing a quarantined name left its run alive")
	}
	if st := s.Status(ctx); len(st.Quarantined) != 0 {
		t.Fatalf("still quarantined: %+v", st.Quarantined)
	}
	shut(s)
	s = open(t, d, true)
	list := s.List(ctx)
	if st := s.Status(ctx); len(list) != 1 || list[0].Name != "fixed" || len(st.Quarantined) != 0 {
		t.Fatalf("after a restart: %+v, quarantined %+v; want fixed alone", list, st.Quarantined)
	}
}

// TestFullDiskChangesAreNotAcknowledged: on a full state disk, a replace
// is refused before the running workload is touched, and a stop or a start
// that cannot be recorded says so instead of answering done.
func TestFullDiskChangesAreNotAcknowledged(t *testing.T) {
	fs := testenv.SmallDisk(t, 8<<20)
	d := dirs{state: filepath.Join(fs, "state"), run: filepath.Join(t.TempDir(), "run")}
	ctx := context.Background()
	s := open(t, d, true)
	defer func() { shut(s) }()
	// Records larger than a page: none fits in what the last page of the
	// journal's log has left once the disk is full.
	big := func(script string) *spec.Workload {
		w := shSpec("kept", script)
		w.Env = map[string]string{"PAD": strings.Repeat("x", 20<<10)}
		return w
	}
	first, err := s.Apply(ctx, big("exec sleep 100"), ApplyOptions{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.FillDisk(t, filepath.Join(fs, "filler"))

	if _, err := s.Apply(ctx, big("exec sleep 101"), ApplyOptions{Start: true}); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("replace on a full disk: %v; want it refused", err)
	}
	if w, _ := s.Get(ctx, "kept"); w.PID != first.PID || w.State != status.Running || w.Spec.Command[2] != "exec sleep 100" {
		t.Fatalf("a refused replace touched the workload: %+v", w)
	}
	if _, err := s.Stop(ctx, "kept"); err == nil || !strings.Contains(err.Error(), "a daemon restart would undo") {
		t.Fatalf("stop on a full disk: %v; want it said that it is not recorded", err)
	}
	if _, err := s.Start(ctx, "kept"); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("start on a full disk: %v; want it refused", err)
	}
	if w, _ := s.Get(ctx, "kept"); w.PID != 0 {
		t.Fatalf("a start that could not be recorded started pid %d", w.PID)
	}
}
