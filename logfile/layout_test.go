package logfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemove(t *testing.T) {
	tests := []struct {
		name        string
		files       []string
		generations int
		wantLeft    []string
	}{
		{
			name:        "live and generations",
			files:       []string{"w.log", "w.log.1", "w.log.2", "w.log.3"},
			generations: 3,
		},
		{
			name:        "half-written generation from a crash",
			files:       []string{"w.log", "w.log.rotating"},
			generations: 3,
		},
		{
			name:        "leaves other workloads and extra generations alone",
			files:       []string{"w.log", "w.log.1", "w.log.2", "w.logger", "x.log", "x.log.1"},
			generations: 1,
			wantLeft:    []string{"w.log.2", "w.logger", "x.log", "x.log.1"},
		},
		{
			name:        "nothing there",
			generations: 3,
		},
		{
			name:        "gap in generations",
			files:       []string{"w.log.2"},
			generations: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				writeFile(t, filepath.Join(dir, f), f)
			}
			if err := Remove(filepath.Join(dir, "w.log"), tt.generations); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, e := range entries {
				left = append(left, e.Name())
			}
			slices.Sort(left)
			want := slices.Clone(tt.wantLeft)
			slices.Sort(want)
			if !slices.Equal(left, want) {
				t.Errorf("left %v, want %v", left, want)
			}
		})
	}
}

func TestRemoveMissingDir(t *testing.T) {
	if err := Remove(filepath.Join(t.TempDir(), "gone", "w.log"), 3); err != nil {
		t.Fatalf("Remove in a missing directory = %v, want nil", err)
	}
}
