package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"

	"github.com/flyd-dev/flyd/spec"
)

// TestPeerVolumes: a caller other than root mounts no host path, its own
// or not, whatever the workload's kind; root mounts any.
func TestPeerVolumes(t *testing.T) {
	policy, err := PeerUsersPolicy("nobody")
	if err != nil {
		t.Fatal(err)
	}
	w := func(vols ...string) *spec.Workload {
		return &spec.Workload{Name: "c", Kind: spec.KindContainerd, User: "nobody",
			Containerd: &spec.Containerd{Image: "bbox", Volumes: vols}}
	}
	peer := Peer{UID: 65534, GID: 65534}
	for _, tt := range []struct {
		vols  []string
		field string
	}{
		{[]string{"/tmp:/x"}, "containerd.volumes[0]"},
		{[]string{"data:/d", "/home/nobody:/src:ro"}, "containerd.volumes[1]"},
		{[]string{"/nonexistent:/n"}, "containerd.volumes[0]"},
	} {
		err := policy(peer, w(tt.vols...))
		var e *api.Error
		if !errors.As(err, &e) || e.Code != "forbidden" || e.Field != tt.field || !strings.Contains(e.Message, "mounts no host path") {
			t.Errorf("a peer's %q: %v; want forbidden, field %s", tt.vols, err, tt.field)
		}
	}
	// A named volume is not a host path: the kind is what refuses it.
	if err := policy(peer, w("data:/d")); err == nil || !strings.Contains(err.Error(), "kind:") {
		t.Errorf("a peer's named volume: %v; want the kind refused", err)
	}
	if err := policy(Peer{UID: 0}, w("/etc:/host-etc:ro")); err != nil {
		t.Errorf("root's host path: %v", err)
	}
}

// TestPeerWatching: a caller other than root may declare watch entries,
// but not turn watching on: the daemon would read the tree as root.
func TestPeerWatching(t *testing.T) {
	policy, err := PeerUsersPolicy("nobody")
	if err != nil {
		t.Fatal(err)
	}
	w := &spec.Workload{Name: "w", Kind: spec.KindNative, Command: []string{"/bin/true"}, User: "nobody",
		Watch: []spec.Watch{{Path: "/home/nobody/src", Action: spec.WatchRestart}}}
	peer := Peer{UID: 65534, GID: 65534}
	if err := policy(peer, w.Clone()); err != nil {
		t.Errorf("a peer's declared watch: %v", err)
	}
	w.Watching = true
	var e *api.Error
	if err := policy(peer, w.Clone()); !errors.As(err, &e) || e.Code != "forbidden" || e.Field != "watching" || !strings.Contains(e.Message, "as root") {
		t.Errorf("a peer's watching: %v; want forbidden, field watching", err)
	}
	if err := policy(Peer{UID: 0}, w.Clone()); err != nil {
		t.Errorf("root's watching: %v", err)
	}
}
