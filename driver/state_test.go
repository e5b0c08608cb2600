package driver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/spec"
)

func TestStateKeepsTheDriversOwnPart(t *testing.T) {
	st := State{Driver: spec.KindNative, PID: 42, ID: "c-1", StartedAt: time.Unix(100, 0).UTC()}
	type own struct {
		Ticks uint64 `json:"ticks"`
	}
	if err := st.Encode(3, own{7}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var got own
	if err := back.Decode(&got); err != nil || got.Ticks != 7 || back.Version != 3 || back.PID != 42 || back.ID != "c-1" || !back.StartedAt.Equal(st.StartedAt) {
		t.Fatalf("round trip: %+v, own %+v (%v)", back, got, err)
	}
}

// A record of a flyd before drivers kept their own part reads as version
// 0 with the whole object as the driver's part, the container id as ID.
func TestStateReadsTheOldLayout(t *testing.T) {
	old := `{"driver":"containerd","pid":9,"container_id":"web-1","cgroup":"/flyd/web","started_at":"2026-01-01T00:00:00Z"}`
	var st State
	if err := json.Unmarshal([]byte(old), &st); err != nil {
		t.Fatal(err)
	}
	var legacy struct {
		Cgroup string `json:"cgroup"`
	}
	if err := st.Decode(&legacy); err != nil || st.Version != 0 || st.ID != "web-1" || st.PID != 9 || legacy.Cgroup != "/flyd/web" {
		t.Fatalf("old layout read as %+v, cgroup %q (%v)", st, legacy.Cgroup, err)
	}
	if err := (State{Driver: spec.KindNix, Version: 1, Data: []byte(`[`)}).Decode(&legacy); err == nil {
		t.Fatal("a damaged driver part decoded")
	}
}
