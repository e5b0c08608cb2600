package top

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/flyd-dev/flyd/api"
)

func TestUsageIsARate(t *testing.T) {
	m := newModel(context.Background(), nil)
	t0 := time.Unix(1000, 0)
	m.takeStats(&api.Stats{At: t0, Workloads: []api.Usage{{Workload: "a", CPUSeconds: 10, MemoryBytes: 1 << 20}}})
	if u := m.usage["a"]; u.cpu != 0 || u.memory != 1<<20 {
		t.Fatalf("first sample: %+v, want no rate yet", u)
	}
	m.takeStats(&api.Stats{At: t0.Add(2 * time.Second), Workloads: []api.Usage{{Workload: "a", CPUSeconds: 11}}})
	if u := m.usage["a"]; u.cpu != 0.5 {
		t.Fatalf("a second over two seconds is %v cores, want 0.5", u.cpu)
	}
	// A restart starts the count again: no negative rate.
	m.takeStats(&api.Stats{At: t0.Add(4 * time.Second), Workloads: []api.Usage{{Workload: "a", CPUSeconds: 0.1}}})
	if u := m.usage["a"]; u.cpu != 0 {
		t.Fatalf("after a restart the rate is %v", u.cpu)
	}
}

func TestSelectionSortAndFilter(t *testing.T) {
	m := newModel(context.Background(), nil)
	m.workloads = []api.Workload{
		{Name: "web", State: api.StateRunning, Restarts: 1},
		{Name: "db", State: api.StateFailed, Restarts: 5},
		{Name: "cache", State: api.StateRunning},
	}
	m.arrange()
	if m.selected != "cache" {
		t.Fatalf("selected %q, want the first by name", m.selected)
	}
	// Keys typed fast come as one message.
	m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})
	if m.selected != "web" {
		t.Fatalf("after jj: %q, want web", m.selected)
	}
	for m.sortBy != 4 { // restarts
		m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("o")})
	}
	if m.shown[0].Name != "db" || m.selected != "web" {
		t.Fatalf("by restarts: %v, selected %q", m.shown, m.selected)
	}
	m.filter = "run"
	m.arrange()
	if len(m.shown) != 2 {
		t.Fatalf("filter by state shows %v", m.shown)
	}
	m.filter = "nothing"
	m.arrange()
	if m.selected != "" {
		t.Fatalf("a filter that matches nothing keeps %q selected", m.selected)
	}
}

// At 120 columns the networks view shows every network's workloads,
// however many ports it publishes.
func TestNetworksViewKeepsWorkloads(t *testing.T) {
	m := newModel(context.Background(), nil)
	m.view = networksView
	n := api.Network{Name: "ci-pub", Address: "10.213.0.2", Egress: true, Workloads: []string{"pub-0", "pub-1", "pub-2"}}
	for i := range 3 {
		for j, port := range []int{8000, 9000} {
			n.Published = append(n.Published, api.Published{HostPort: 40000 + 10*i + j, Workload: fmt.Sprintf("pub-%d", i), Port: port + i})
		}
	}
	m.networks = []api.Network{n, {Name: "ci-quiet", Workloads: []string{"lone"}}}
	rows := m.table(120, 5)
	if !strings.Contains(rows[0], "WORKLOADS") {
		t.Errorf("the header has no WORKLOADS: %q", rows[0])
	}
	if !strings.Contains(rows[1], "pub-0,pub-1,pub-2") || !strings.Contains(rows[2], "lone") {
		t.Errorf("the workloads are not on screen:\n%s", strings.Join(rows, "\n"))
	}
	for _, r := range rows {
		if w := ansi.StringWidth(r); w > 120 {
			t.Errorf("a row of %d columns: %q", w, r)
		}
	}
	if !strings.Contains(rows[1], "40000->pub-0:8000") {
		t.Errorf("the first published port is not on screen: %q", rows[1])
	}
}

func TestHistoryStart(t *testing.T) {
	for _, tt := range []struct{ last, n, want uint64 }{
		{0, 200, 0},   // nothing yet: from now
		{150, 200, 1}, // all but the first
		{1000, 200, 800},
	} {
		if got := historyStart(tt.last, tt.n); got != tt.want {
			t.Errorf("historyStart(%d, %d) = %d, want %d", tt.last, tt.n, got, tt.want)
		}
	}
}
