package records

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/events"
	"github.com/flyd-dev/flyd/journal"
	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestWorkloadEncoding: a record is encoded as json.Marshal encodes it,
// for 2,000 random records: every field set or not, strings that need
// escaping, times with and without nanoseconds and in other zones.
func TestWorkloadEncoding(t *testing.T) {
	st, err := Open(t.TempDir(), t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := &spec.Workload{Name: "web", Command: []string{"/bin/sleep", "1"}}
	w.SetDefaults()
	rnd := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "stopped by request", `say "hi" <b> & \ go`, "ünïcode ✓", "tab\there\nnl", "\x00\x7f", string([]byte{0xff, 'a'})}
	str := func() string { return strs[rnd.IntN(len(strs))] }
	tm := func() *time.Time {
		if rnd.IntN(3) == 0 {
			return nil
		}
		t := time.Unix(rnd.Int64N(4e9), rnd.Int64N(2)*rnd.Int64N(1e9)).In(time.FixedZone("z", 3600*(rnd.IntN(5)-2)))
		return &t
	}
	for range 2000 {
		r := Workload{Spec: w, Running: rnd.IntN(2) == 0, Owner: str(), By: uint32(rnd.IntN(3)) * 1000,
			Rest: status.State(str()), LastError: str(), Reason: str(), StartedAt: tm(), Restarts: rnd.IntN(3) - 1, ScheduledThrough: tm()}
		if at := tm(); at != nil {
			r.LastExit = &events.ExitRecord{Code: rnd.IntN(200), Signal: str(), At: *at, Unknown: rnd.IntN(2) == 0, Reason: str(), Description: str()}
		}
		got, err := st.encodeWorkload(r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r)
		if !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%s\nwant\n%s", got, want)
		}
	}
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.encodeWorkload(Workload{Spec: w, StartedAt: &far}); err == nil {
		t.Error("a start past the year 9999 was encoded")
	}
}

// TestStateSavedAfterOpenKeepsTheStoredSpec: the first save of a loaded
// workload whose spec is the one loaded (a stop after a restart) writes
// the spec's bytes as they were stored, without encoding it again: here
// an earlier daemon's spec without the defaults this one adds at load.
func TestStateSavedAfterOpenKeepsTheStoredSpec(t *testing.T) {
	stateDir, runDir := t.TempDir(), t.TempDir()
	j, _, err := journal.Open(filepath.Join(stateDir, "workloads.journal"))
	if err != nil {
		t.Fatal(err)
	}
	const stored = `{"name":"old","command":["/bin/true"]}`
	if err := j.Put("old", []byte(`{"spec":`+stored+`,"running":true}`)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	st, err := Open(stateDir, runDir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, bad := st.Workloads()
	if len(recs) != 1 || len(bad) != 0 {
		t.Fatalf("loaded %v, bad %v", recs, bad)
	}
	r := recs[0]
	if r.Spec.Restart.Policy == "" {
		t.Fatal("the loaded spec is not defaulted")
	}
	r.Running, r.Rest, r.Reason = false, status.Stopped, "stopped by request"
	if err := st.SaveWorkload(r); err != nil {
		t.Fatal(err)
	}
	want := `{"spec":` + stored + `,"running":false,"rest":"stopped","reason":"stopped by request"}`
	if got := journalCopy(t, filepath.Join(stateDir, "workloads.journal"))["old"]; string(got) != want {
		t.Errorf("saved\n%s\nwant\n%s", got, want)
	}
	// A new spec is encoded.
	r.Spec = r.Spec.Clone()
	if err := st.SaveWorkload(r); err != nil {
		t.Fatal(err)
	}
	want2, _ := json.Marshal(r)
	if got := journalCopy(t, filepath.Join(stateDir, "workloads.journal"))["old"]; !bytes.Equal(got, want2) {
		t.Errorf("saved with a new spec\n%s\nwant\n%s", got, want2)
	}
}
