package spec

import (
	"strings"
	"testing"
)

// replicated is a valid group of three: its endpoint's port is ephemeral,
// its published port the group's.
func replicated() *Workload {
	w := &Workload{Name: "web", Command: []string{"/bin/serve"}, Replicas: 3, Network: "ci",
		Endpoints: []Endpoint{{Name: "http", API: "http", Port: Port{Mode: PortEphemeral}, Publish: Port{Mode: PortHashed},
			Visibility: VisibilityPublic, Exposure: ExposurePublic}}}
	w.SetDefaults()
	return w
}

func TestValidateReplicas(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(w *Workload)
		want   string // in the error; "" for valid
	}{
		{"valid", func(w *Workload) {}, ""},
		{"one", func(w *Workload) { w.Replicas = 1 }, ""},
		{"negative", func(w *Workload) { w.Replicas = -1 }, "replicas: must be between 1 and 64"},
		{"too many", func(w *Workload) { w.Replicas = MaxReplicas + 1 }, "replicas: must be between 1 and 64"},
		{"fixed port", func(w *Workload) { w.Endpoints[0].Port = FixedPort(8080) }, "endpoints[0].port: replicas share their network"},
		{"hashed port", func(w *Workload) { w.Endpoints[0].Port = Port{Mode: PortHashed} }, "say port: ephemeral"},
		{"scheduled", func(w *Workload) { w.Schedule = "@hourly" }, "a scheduled one-shot"},
		{"last name too long", func(w *Workload) { w.Name = strings.Repeat("a", 61); w.Replicas = 10 }, "the last replica's name"},
		{"last name fits", func(w *Workload) { w.Name = strings.Repeat("a", 60); w.Replicas = 10 }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := replicated()
			tt.change(w)
			err := w.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestReplicaNames(t *testing.T) {
	g := replicated()
	g.Project = "ci-7"
	g.Qualify()
	r := g.Replica(2)
	if r.Name != "ci-7.web-2" || r.ReplicaOf != "ci-7.web" || r.Replicas != 0 {
		t.Fatalf("replica 2: name %q of %q, replicas %d", r.Name, r.ReplicaOf, r.Replicas)
	}
	if id := r.Identified(); id.Module != "web" || id.Service != "web" {
		t.Errorf("replica 2 is %s/%s, not its group's service", id.Module, id.Service)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("a replica's spec is refused: %v", err)
	}
	if back := r.Group(5); back.Name != g.Name || back.Replicas != 5 || back.ReplicaOf != "" {
		t.Errorf("group of replica 2: %q, %d replicas, of %q", back.Name, back.Replicas, back.ReplicaOf)
	}
	for name, want := range map[string]int{"web-1": 1, "web-64": 64, "web-65": 0, "web-01": 0, "web-": 0, "web-x": 0, "webs-1": 0} {
		if got := ReplicaIndex("web", name); got != want {
			t.Errorf("ReplicaIndex(web, %s) = %d, want %d", name, got, want)
		}
	}
}

// TestOrderGroups: a workload after a group comes after each of its
// replicas.
func TestOrderGroups(t *testing.T) {
	g := replicated()
	app := &Workload{Name: "app", After: []string{"web"}}
	levels, err := Order([]*Workload{app, g.Replica(1), g.Replica(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(levels) != 2 || len(levels[0]) != 2 || levels[1][0].Name != "app" {
		t.Fatalf("levels %v", names(levels))
	}
}

func names(levels [][]*Workload) [][]string {
	out := make([][]string, len(levels))
	for i, l := range levels {
		for _, w := range l {
			out[i] = append(out[i], w.Name)
		}
	}
	return out
}
