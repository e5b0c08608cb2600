package top

import (
	"context"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

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
