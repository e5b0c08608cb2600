package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestStaleFileRecreated(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		data string
	}{
		{"empty leftover", 0o444, ""},
		{"writable leftover", 0o644, ""},
		{"leftover with bytes", 0o600, "junk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNetworks(t)
			path := filepath.Join(n.Dir(), "stale")
			if err := os.WriteFile(path, []byte(tt.data), tt.mode); err != nil {
				t.Fatal(err)
			}
			nw, err := n.Ensure("stale")
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := isNamespace(nw.Path); !ok || err != nil {
				t.Fatalf("Ensure left %s unmounted (%v)", nw.Path, err)
			}
			err = nw.Do(func() error {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				defer ln.Close()
				return pingPong(ln)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNewNetworksSweepsLeftovers(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "run", "networks") // also checks creation
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name, data string
		kept       bool
	}{
		{"crashed", "", false},
		{"not-ours", "data", true},
		{"Not_A_Name", "", true},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewNetworks(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if kept := err == nil; kept != f.kept {
			t.Errorf("%s kept = %v, want %v", f.name, kept, f.kept)
		}
	}
}
