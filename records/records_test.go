package records

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestRecordsSurviveReopening: what is recorded is found again after the
// store is reopened; a record that does not load is reported with what
// can be read of it and keeps none of the others down; the older layout's
// files are moved into the journal; removed records stay removed.
func TestRecordsSurviveReopening(t *testing.T) {
	stateDir, runDir := t.TempDir(), t.TempDir()
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	web := &spec.Workload{Name: "web", Command: []string{"/bin/true"}}
	web.SetDefaults()
	gone := web.Clone()
	gone.Name = "gone"
	for _, r := range []Workload{{Spec: web, Running: true, Owner: "web.yaml", By: 1000}, {Spec: gone, Rest: status.Stopped}} {
		if err := st.SaveWorkload(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RemoveWorkload("gone"); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveRun("web", Run{Process: driver.State{Driver: spec.KindNative, PID: 4242}, Restarts: 2}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDoc(spec.KindNetwork, "ci", []byte(`{"name":"ci"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// An older daemon's layout: one file per workload, one of them bad.
	old := filepath.Join(stateDir, "workloads")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		"legacy": `{"spec":{"name":"legacy","command":["/bin/true"]},"rest":"stopped"}`,
		"broken": `{"spec":{"name":"broken","network":"ci","command":`,
		"other":  `{"spec":{"name":"someone-else","network":"ci","command":["/bin/true"]},"owner":"x.yaml"}`,
	} {
		if err := os.WriteFile(filepath.Join(old, name+".json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	st, err = Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, bad := st.Workloads()
	var names []string
	for _, r := range recs {
		names = append(names, r.Spec.Name)
	}
	if !slices.Equal(names, []string{"legacy", "web"}) {
		t.Errorf("workloads %v; want legacy and web", names)
	}
	if w := recs[len(recs)-1]; !w.Running || w.Owner != "web.yaml" || w.By != 1000 || w.Spec.Restart.Policy == "" {
		t.Errorf("web's record: %+v", w)
	}
	if b := bad["broken"]; b.Err == nil || b.Network != "" {
		t.Errorf("the broken record: %+v; want an error and no network read", b)
	}
	if b := bad["other"]; b.Err == nil || b.Network != "ci" || b.Owner != "x.yaml" {
		t.Errorf("the record of another name: %+v; want an error, its network and owner", b)
	}
	if len(bad) != 2 {
		t.Errorf("bad records %v", bad)
	}
	if _, err := os.Stat(filepath.Join(old, "legacy.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the moved file is still there: %v", err)
	}
	if r, ok, err := st.LoadRun("web"); err != nil || !ok || r.Process.PID != 4242 || r.Restarts != 2 {
		t.Errorf("web's run: %+v, %v, %v", r, ok, err)
	}
	if docs := st.Docs(spec.KindNetwork); len(docs) != 1 || string(docs["ci"]) != `{"name":"ci"}` {
		t.Errorf("network documents %q", docs)
	}
	if err := st.RemoveRun("web"); err != nil || len(st.RunNames()) != 0 {
		t.Errorf("after removing web's run: %v, runs %v", err, st.RunNames())
	}
	if err := st.RemoveRun("web"); err != nil {
		t.Errorf("removing a run twice: %v", err)
	}
}

// TestOwners: a document's owner is recorded before it is in force and
// found again after reopening; an older daemon's owners file is moved
// into the journal and removed.
func TestOwners(t *testing.T) {
	stateDir, runDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(stateDir, ownersFile), []byte(`{"network/old":"old.yaml"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	o := st.Owners()
	if err := o.Set("policy/quiet", "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := o.Set("network/gone", "stack.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := o.Set("network/gone", ""); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, ownersFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the owners file is left after the move: %v", err)
	}
	st, err = Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all := st.Owners().All()
	if len(all) != 2 || all["network/old"] != "old.yaml" || st.Owners().Of("policy/quiet") != "stack.yaml" {
		t.Errorf("owners after reopening: %v", all)
	}
}

// TestRecoverRuns: each name's run record is read and its run asked for;
// a name without a record is nil.
func TestRecoverRuns(t *testing.T) {
	st, err := Open(t.TempDir(), t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, name := range []string{"a", "b"} {
		if err := st.SaveRun(name, Run{Process: driver.State{Driver: spec.KindNative, PID: 10 + i}, Restarts: i}); err != nil {
			t.Fatal(err)
		}
	}
	errDown := errors.New("runtime down")
	ask := func(ctx context.Context, p driver.State) (driver.Process, error) {
		if p.PID == 11 {
			return nil, errDown
		}
		return nil, nil
	}
	got := st.RecoverRuns(context.Background(), []string{"a", "none", "b"}, ask)
	if len(got) != 3 || got[1] != nil {
		t.Fatalf("recovered %+v", got)
	}
	if a := got[0]; a == nil || a.Run.Process.PID != 10 || a.Proc != nil || a.Err != nil {
		t.Errorf("a: %+v", a)
	}
	if b := got[2]; b == nil || b.Run.Restarts != 1 || !errors.Is(b.Err, errDown) {
		t.Errorf("b: %+v", b)
	}
}

// TestSavedRecordIsItsEncoding: a record saved again with its spec
// unchanged (a change of state alone, which reuses the spec's encoding)
// or with a new spec is stored as json.Marshal encodes it, and loads as
// the last one saved.
func TestSavedRecordIsItsEncoding(t *testing.T) {
	stateDir, runDir := t.TempDir(), t.TempDir()
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	web := &spec.Workload{Name: "web", Command: []string{"/bin/sleep", "1"}, Env: map[string]string{"A": "x"}}
	web.SetDefaults()
	changed := web.Clone()
	changed.Command = []string{"/bin/sleep", "2"}
	exit := &events.ExitRecord{Code: 143, Signal: "SIGTERM", Description: "killed by SIGTERM"}
	started := time.Unix(1700000000, 5).UTC()
	saves := []Workload{
		{Spec: web, Running: true, Owner: "web.yaml", By: 1000},
		{Spec: web, Rest: status.Stopped, Reason: "stopped by request", StartedAt: &started, LastExit: exit, Restarts: 2},
		{Spec: changed, Running: true},
		{Spec: changed, Rest: status.Failed, LastError: "boom"},
	}
	for _, r := range saves {
		if err := st.SaveWorkload(r); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r)
		if got := journalCopy(t, filepath.Join(stateDir, "workloads.journal"))["web"]; !bytes.Equal(got, want) {
			t.Fatalf("stored\n%s\nwant\n%s", got, want)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, bad := st.Workloads()
	if len(bad) != 0 || len(recs) != 1 {
		t.Fatalf("loaded %d records, bad %v", len(recs), bad)
	}
	if got := recs[0]; !slices.Equal(got.Spec.Command, changed.Command) || got.Rest != status.Failed || got.LastError != "boom" {
		t.Fatalf("loaded %+v", got)
	}
}

// journalCopy is what a copy of the journal in dir holds.
func journalCopy(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	j, recs, err := journal.Open(cp)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	return recs
}

// TestRunRecordFields: the hooks' kept fields sit beside the record's own,
// as every daemon has written them: an older daemon's record reads into
// them, and is written back the same.
func TestRunRecordFields(t *testing.T) {
	old := `{"log_from":42,"log_pipe":true,"process":{"driver":"native","pid":7},"ready":true,"restarts":3}`
	var r Run
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	var ready, pipe bool
	var from int64
	if r.Restarts != 3 || r.Process.PID != 7 || !r.Kept.Get("ready", &ready) || !ready ||
		!r.Kept.Get("log_pipe", &pipe) || !pipe || !r.Kept.Get("log_from", &from) || from != 42 {
		t.Fatalf("read %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var again, want map[string]any
	_ = json.Unmarshal(b, &again)
	_ = json.Unmarshal([]byte(old), &want)
	delete(again, "process") // the process's state is driver's, written whole
	delete(want, "process")
	if fmt.Sprint(again) != fmt.Sprint(want) {
		t.Errorf("written back as %s; want %s", b, old)
	}
}
