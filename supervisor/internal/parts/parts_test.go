package parts

import (
	"testing"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

// TestPartsReopen: what the parts keep is found again by parts opened
// anew under the same directories, once the first were closed.
func TestPartsReopen(t *testing.T) {
	state, run := t.TempDir(), t.TempDir()
	p, err := Open(state, run, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Events.Publish(status.Event{Type: status.EventApplied, Workload: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Store.PutDoc(spec.KindNetwork, "ci", []byte(`{"name":"ci"}`)); err != nil {
		t.Fatal(err)
	}
	last := p.Events.Last()
	p.Close()
	q, err := Open(state, run, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Events.Last() != last || last == 0 {
		t.Fatalf("the last event: %d, then %d", last, q.Events.Last())
	}
	if _, ok := q.Store.Docs(string(spec.KindNetwork))["ci"]; !ok {
		t.Fatal("the network document is gone")
	}
}
