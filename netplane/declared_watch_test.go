package netplane

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/status"
)

// The refusals the kernel counts become an event at a workload's first
// refusal to an endpoint, then a count at most once a minute; a count
// that fell (a table made again) starts again; a restarted daemon that
// reads the same counts announces nothing again.
func TestRefusalEvents(t *testing.T) {
	var events []string
	dir := t.TempDir()
	plane := func() *Plane {
		p := &Plane{cfg: Config{RunDir: dir, Event: func(ev status.Event) { events = append(events, ev.Workload+": "+ev.Message) }}, log: zap.NewNop()}
		p.declared.names = map[uint64]string{7: "ci.side"}
		p.declared.plan.targets = map[destKey]Target{{"/ns/ci", netip.Addr{}, 5432}: {Workload: "ci.pg", Endpoint: "sql", Port: 5432}}
		return p
	}
	p := plane()
	at := time.Unix(1000, 0)
	read := func(count uint64, after time.Duration) []string {
		events = nil
		p.noteRefusals([]firewall.Refusal{{NS: "/ns/ci", Cgroup: 7, Port: 5432, Count: count}}, at.Add(after))
		return events
	}
	for _, tt := range []struct {
		count uint64
		after time.Duration
		want  string
	}{
		{1, 0, "ci.side: undeclared dependency: ci.side → ci.pg/sql (5432)"},
		{5, time.Second, ""},
		{9, 30 * time.Second, ""},
		{9, 61 * time.Second, "ci.side: undeclared dependency: ci.side → ci.pg/sql (5432): refused 8 more times"},
		{2, 62 * time.Second, ""}, // the table made again: 2 more, announced in a minute
		{2, 122 * time.Second, "ci.side: undeclared dependency: ci.side → ci.pg/sql (5432): refused 2 more times"},
	} {
		got := read(tt.count, tt.after)
		want := []string{tt.want}
		if tt.want == "" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("count %d after %v: events %q, want %q", tt.count, tt.after, got, tt.want)
		}
	}
	if r := p.declared.watch.byTarget()["ci.pg/sql"]; len(r) != 1 || r[0].Workload != "ci.side" || r[0].Count != 11 {
		t.Errorf("refusals of pg/sql: %+v, want ci.side 11", r)
	}
	// A restarted daemon takes up what was read: the same count is no
	// news, one more is (and is counted, not announced as a first).
	p = plane()
	p.loadRefusals()
	if got := read(2, 123*time.Second); len(got) != 0 {
		t.Errorf("after a restart, the same count said %q", got)
	}
	if r := p.declared.watch.byTarget()["ci.pg/sql"]; len(r) != 1 || r[0].Count != 11 {
		t.Errorf("after a restart: %+v, want the 11 counted before", r)
	}
}
