package netalloc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

func TestTablesSurviveRestart(t *testing.T) {
	ctx := context.Background()
	m, dir := newManager(t)
	fixed := freePort(t)
	if _, err := m.Assign(ctx, "host", nil, "api", []Request{
		{Endpoint: "http", Mode: ModeFixed, Port: fixed},
		{Endpoint: "tmp", Mode: ModeEphemeral},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Assign(ctx, "ci-7", nil, "db", []Request{{Endpoint: "tcp", Mode: ModeEphemeral}}); err != nil {
		t.Fatal(err)
	}
	reloaded, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := m.List(), reloaded.List(); !slices.Equal(a, b) || len(a) != 3 {
		t.Fatalf("after restart %v, want %v", b, a)
	}
	if got := reloaded.Networks(); !slices.Equal(got, []string{"ci-7", "host"}) {
		t.Errorf("Networks = %v", got)
	}
	if got := leftovers(t, dir); !slices.Equal(got, []string{"ci-7.json", "host.json"}) {
		t.Errorf("directory holds %v, want one file per network and no temporary files", got)
	}
}

func TestListIsSorted(t *testing.T) {
	m, _ := newManager(t)
	for _, network := range []string{"zeta", "alpha", "host"} {
		for _, ep := range []string{"a", "b", "c"} {
			if _, err := m.AllocateTemporaryPort(context.Background(), network, nil, "w-"+ep, ep); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := m.List()
	sorted := slices.IsSortedFunc(list, func(a, b Reservation) int {
		if c := strings.Compare(a.Network, b.Network); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
	if !sorted || len(list) != 9 {
		t.Errorf("List = %v, want 9 sorted by network then port", list)
	}
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	m, dir := newManager(t)
	p := freePort(t)
	for _, network := range []string{"host", "ci"} {
		if _, err := m.Assign(ctx, network, nil, "api", []Request{{Endpoint: "http", Mode: ModeFixed, Port: p}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Assign(ctx, "ci", nil, "db", []Request{{Endpoint: "tcp", Mode: ModeEphemeral}}); err != nil {
		t.Fatal(err)
	}

	if err := m.Release("api", "host"); err != nil {
		t.Fatal(err)
	}
	if m.InUse("host") || !m.InUse("ci") {
		t.Errorf("after releasing api in host: InUse(host)=%v InUse(ci)=%v", m.InUse("host"), m.InUse("ci"))
	}
	if got := leftovers(t, dir); !slices.Equal(got, []string{"ci.json"}) {
		t.Errorf("files %v, want the empty host table removed", got)
	}
	// The freed port goes to someone else.
	if _, err := m.Assign(ctx, "host", nil, "other", []Request{{Endpoint: "x", Mode: ModeFixed, Port: p}}); err != nil {
		t.Errorf("freed port refused: %v", err)
	}
	if err := m.Release("api", ""); err != nil {
		t.Fatal(err)
	}
	if list := m.List(); len(list) != 2 || list[0].Workload != "db" || list[1].Workload != "other" {
		t.Errorf("after releasing api everywhere: %v", list)
	}
	// Releasing what is not held is a no-op, so an interrupted removal can be repeated.
	for _, network := range []string{"", "host", "never-used"} {
		if err := m.Release("api", network); err != nil {
			t.Errorf("Release(api, %q) again: %v", network, err)
		}
	}
	if m.InUse("never-used") {
		t.Error("releasing in an unknown network created it")
	}
}

func TestReleasePort(t *testing.T) {
	m, dir := newManager(t)
	port, err := m.AllocateTemporaryPort(context.Background(), "ci", nil, "w", "http")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		network string
		port    int
		want    error
	}{
		{"held", "ci", port, nil},
		{"again", "ci", port, errdefs.ErrNotFound},
		{"unknown network", "elsewhere", port, errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		if err := m.ReleasePort(tt.network, tt.port); !errors.Is(err, tt.want) {
			t.Errorf("%s: ReleasePort = %v, want %v", tt.name, err, tt.want)
		}
	}
	if m.InUse("ci") || len(leftovers(t, dir)) != 0 {
		t.Errorf("after ReleasePort: table %v, files %v", m.List(), leftovers(t, dir))
	}
}

func TestLoadRefusesDamagedTables(t *testing.T) {
	good := `{"version":1,"reservations":[{"network":"host","port":8080,"workload":"w","endpoint":"http","mode":"fixed"}]}`
	tests := []struct{ name, file, body string }{
		{"not json", "host.json", "{"},
		{"other version", "host.json", `{"version":2,"reservations":[]}`},
		{"network mismatch", "ci.json", good},
		{"bad file name", "Bad_Name.json", good},
		{"port twice", "host.json", `{"version":1,"reservations":[
			{"network":"host","port":8080,"workload":"a","endpoint":"http","mode":"fixed"},
			{"network":"host","port":8080,"workload":"b","endpoint":"http","mode":"fixed"}]}`},
		{"holder twice", "host.json", `{"version":1,"reservations":[
			{"network":"host","port":8080,"workload":"a","endpoint":"http","mode":"fixed"},
			{"network":"host","port":8081,"workload":"a","endpoint":"http","mode":"ephemeral"}]}`},
		{"port out of range", "host.json", `{"version":1,"reservations":[{"network":"host","port":0,"workload":"a","endpoint":"http","mode":"ephemeral"}]}`},
		{"unknown mode", "host.json", `{"version":1,"reservations":[{"network":"host","port":80,"workload":"a","endpoint":"http","mode":"x"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, tt.file), tt.body)
			if _, err := NewManager(dir); err == nil {
				t.Error("NewManager accepted a damaged table")
			}
		})
	}
}

func TestLoadSweepsTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".host.json.tmp-123"), "{half")
	write(t, filepath.Join(dir, "README"), "not a table")
	m, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.List()) != 0 {
		t.Errorf("List = %v", m.List())
	}
	if got := leftovers(t, dir); !slices.Equal(got, []string{"README"}) {
		t.Errorf("files %v, want the temporary file swept and the rest left alone", got)
	}
}

func TestMemoryOnlyManager(t *testing.T) {
	m, err := NewManager("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AllocateTemporaryPort(context.Background(), "host", nil, "w", "http"); err != nil {
		t.Fatal(err)
	}
	if !m.InUse("host") {
		t.Error("memory-only manager lost its reservation")
	}
}

// leftovers lists the file names in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}
