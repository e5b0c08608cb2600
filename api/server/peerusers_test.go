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

// TestPeerRunsAsItself: a peer runs its workloads as its own uid alone,
// by name, by uid or with no user (filled in with its name); another
// peer's user, root and a user that is no peer are refused, and so is a
// caller that --peer-users does not name. Root runs as anyone.
func TestPeerRunsAsItself(t *testing.T) {
	policy, err := PeerUsersPolicy("nobody, www-data")
	if err != nil {
		t.Skipf("this host has no users nobody and www-data: %v", err)
	}
	w := func(user string) *spec.Workload {
		return &spec.Workload{Name: "w", Kind: spec.KindNative, Command: []string{"/bin/true"}, User: user}
	}
	www := Peer{UID: 33, GID: 33}
	for _, user := range []string{"www-data", "33"} {
		if err := policy(www, w(user)); err != nil {
			t.Errorf("www-data as %q: %v", user, err)
		}
	}
	if x := w(""); policy(www, x) != nil || x.User != "www-data" {
		t.Errorf("www-data with no user: runs as %q; want www-data", x.User)
	}
	for _, tt := range []struct {
		peer Peer
		user string
		want string
	}{
		{www, "nobody", `"nobody": a caller other than root runs its workloads as itself, www-data (uid 33)`},
		{www, "65534", `"65534": a caller other than root runs its workloads as itself`},
		{www, "root", `"root": a caller other than root runs its workloads as itself`},
		{www, "0", `"0": a caller other than root runs its workloads as itself`},
		{www, "no-such-user-xyz", `"no-such-user-xyz"`},
		{Peer{UID: 4242, GID: 4242}, "", "uid 4242 is not a peer user here (nobody, www-data)"},
	} {
		var e *api.Error
		if err := policy(tt.peer, w(tt.user)); !errors.As(err, &e) || e.Code != "forbidden" || e.Field != "user" || !strings.Contains(e.Message, tt.want) {
			t.Errorf("uid %d as %q: %v; want forbidden, field user: %s", tt.peer.UID, tt.user, err, tt.want)
		}
	}
	if err := policy(Peer{UID: 0}, w("www-data")); err != nil {
		t.Errorf("root as www-data: %v", err)
	}
}
