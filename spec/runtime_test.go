package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestRuntimeTable: the kinds come from the table, in rank order, and a
// kind's section is refused on a spec of another kind, named by the table.
func TestRuntimeTable(t *testing.T) {
	if want := []Kind{KindNative, KindNix, KindContainerd, KindExternal}; !slices.Equal(Kinds, want) {
		t.Fatalf("Kinds = %v, want %v", Kinds, want)
	}
	for _, k := range Kinds {
		if r, ok := RuntimeOf(k); !ok || r.Kind != k {
			t.Errorf("RuntimeOf(%s) = %+v, %v", k, r, ok)
		}
	}
	if _, ok := RuntimeOf("docker"); ok {
		t.Error("RuntimeOf(docker) found a runtime")
	}
	if got := outsideContainers(); got != "native and nix" {
		t.Errorf("outsideContainers() = %q", got)
	}
	for _, tc := range []struct {
		yaml, want string
	}{
		{"name: a\ncommand: [x]\nnix: {flake: .}\n", "nix: only applies to kind nix"},
		{"name: a\ncommand: [x]\ncontainerd: {image: busybox}\n", "containerd: only applies to kind containerd"},
		{"name: a\nkind: docker\ncommand: [x]\n", "neither a workload's runtime (native, nix, containerd or external)"},
		{"name: a\nkind: containerd\ncontainerd: {image: busybox}\nreload: {exec: [x]}\n", "reload.exec: applies to native and nix workloads"},
		{"name: a\nkind: nix\ncommand: [x]\n", "nix: is required for kind nix"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.yaml, err, tc.want)
		}
	}
	w := &Workload{Name: "a", Kind: "docker", Command: []string{"x"}}
	w.SetDefaults()
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "kind: must be native, nix, containerd or external") {
		t.Errorf("kind docker validated: %v", err)
	}
	// A command may be left to a container's image, never to a process
	// flyd starts itself.
	if _, err := Parse([]byte("name: a\nkind: containerd\ncontainerd: {image: busybox}\n")); err != nil {
		t.Errorf("a containerd spec without a command: %v", err)
	}
	if _, err := Parse([]byte("name: a\n")); err == nil || !strings.Contains(err.Error(), "command: is required for kind native") {
		t.Errorf("a native spec without a command: %v", err)
	}
}
