package netalloc

import (
	"context"
	"errors"
	"io/fs"
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
	if got := leftovers(t, dir); !slices.Equal(got, []string{"ci-7/db.json", "host/api.json"}) {
		t.Errorf("directory holds %v, want one file per workload and network and no temporary files", got)
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
	if got := leftovers(t, dir); !slices.Equal(got, []string{"ci/api.json", "ci/db.json"}) {
		t.Errorf("files %v, want the host's file and directory removed", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "host")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the host's directory outlived its last workload: %v", err)
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
	good := `{"version":2,"reservations":[{"network":"host","port":8080,"workload":"w","endpoint":"http","mode":"fixed"}]}`
	legacy := `{"version":1,"reservations":[{"network":"host","port":8080,"workload":"w","endpoint":"http","mode":"fixed"}]}`
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"not json", map[string]string{"host/w.json": "{"}},
		{"other version", map[string]string{"host/w.json": `{"version":1,"reservations":[]}`}},
		{"network mismatch", map[string]string{"ci/w.json": good}},
		{"workload mismatch", map[string]string{"host/v.json": good}},
		{"bad directory name", map[string]string{"Bad_Name/w.json": good}},
		{"bad file name", map[string]string{"host/Bad_Name.json": good}},
		{"port twice", map[string]string{
			"host/w.json": good,
			"host/v.json": `{"version":2,"reservations":[{"network":"host","port":8080,"workload":"v","endpoint":"http","mode":"fixed"}]}`,
		}},
		{"holder twice", map[string]string{"host/a.json": `{"version":2,"reservations":[
			{"network":"host","port":8080,"workload":"a","endpoint":"http","mode":"fixed"},
			{"network":"host","port":8081,"workload":"a","endpoint":"http","mode":"ephemeral"}]}`}},
		{"port out of range", map[string]string{"host/a.json": `{"version":2,"reservations":[{"network":"host","port":0,"workload":"a","endpoint":"http","mode":"ephemeral"}]}`}},
		{"unknown mode", map[string]string{"host/a.json": `{"version":2,"reservations":[{"network":"host","port":80,"workload":"a","endpoint":"http","mode":"x"}]}`}},
		{"first layout, not json", map[string]string{"host.json": "{"}},
		{"first layout, other version", map[string]string{"host.json": good}},
		{"first layout, network mismatch", map[string]string{"ci.json": legacy}},
		{"first layout, bad file name", map[string]string{"Bad_Name.json": legacy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				write(t, filepath.Join(dir, name), body)
			}
			if _, err := NewManager(dir); err == nil {
				t.Error("NewManager accepted a damaged table")
			}
		})
	}
}

// TestLoadMigratesTheFirstLayout: a network's file of the first layout
// becomes its workloads' files, and goes; one whose migration crashed
// half-way (some workloads' files written) is read from the old file.
func TestLoadMigratesTheFirstLayout(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "host.json"), `{"version":1,"reservations":[
		{"network":"host","port":8080,"workload":"api","endpoint":"http","mode":"fixed"},
		{"network":"host","port":8081,"workload":"api","endpoint":"admin","mode":"ephemeral"},
		{"network":"host","port":9000,"workload":"db","endpoint":"tcp","mode":"hashed"}]}`)
	write(t, filepath.Join(dir, "ci.json"), `{"version":1,"reservations":[
		{"network":"ci","port":5432,"workload":"db","endpoint":"tcp","mode":"fixed"},
		{"network":"ci","port":6379,"workload":"cache","endpoint":"tcp","mode":"fixed"}]}`)
	write(t, filepath.Join(dir, "ci", "db.json"), `{"version":2,"reservations":[{"network":"ci","port":5432,"workload":"db","endpoint":"tcp","mode":"fixed"}]}`)
	m, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Reservation{
		{Network: "ci", Port: 5432, Workload: "db", Endpoint: "tcp", Mode: ModeFixed},
		{Network: "ci", Port: 6379, Workload: "cache", Endpoint: "tcp", Mode: ModeFixed},
		{Network: "host", Port: 8080, Workload: "api", Endpoint: "http", Mode: ModeFixed},
		{Network: "host", Port: 8081, Workload: "api", Endpoint: "admin", Mode: ModeEphemeral},
		{Network: "host", Port: 9000, Workload: "db", Endpoint: "tcp", Mode: ModeHashed},
	}
	if got := m.List(); !slices.Equal(got, want) {
		t.Errorf("migrated tables:\n got %v\nwant %v", got, want)
	}
	if got := leftovers(t, dir); !slices.Equal(got, []string{"ci/cache.json", "ci/db.json", "host/api.json", "host/db.json"}) {
		t.Errorf("files %v, want one per workload and network, and no file of the first layout", got)
	}
	again, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.List(); !slices.Equal(got, want) {
		t.Errorf("after another restart: %v", got)
	}
}

func TestLoadSweepsTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".host.json.tmp-123"), "{half")
	write(t, filepath.Join(dir, "ci", ".w.json.tmp-456"), "{half")
	write(t, filepath.Join(dir, "README"), "not a table")
	m, err := NewManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.List()) != 0 {
		t.Errorf("List = %v", m.List())
	}
	if got := leftovers(t, dir); !slices.Equal(got, []string{"README"}) {
		t.Errorf("files %v, want the temporary files swept and the rest left alone", got)
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

// leftovers lists the files under dir, by their paths relative to it.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
