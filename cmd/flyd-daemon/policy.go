package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/spec"
)

// peerUsersPolicy is what --peer-users turns on. Without it the socket
// group is root-equivalent, as the docker group is: a member applies any
// spec, and flyd runs it as root. With it, a caller other than root may
// apply only native workloads that run as one of users: never as root,
// and never kind nix (whose builds run as root) or containerd (whose
// image's root is the host's).
func peerUsersPolicy(list string) (func(api.Peer, *spec.Workload) error, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	allowed := map[uint32]bool{}
	var names []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		a, err := execenv.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("--peer-users: %q: %w", name, err)
		}
		if a.UID == 0 {
			return nil, fmt.Errorf("--peer-users: %q is root, which a caller other than root may never run as", name)
		}
		allowed[a.UID] = true
		names = append(names, a.Name)
	}
	slices.Sort(names)
	them := strings.Join(names, ", ")
	return func(p api.Peer, w *spec.Workload) error {
		if p.UID == 0 {
			return nil
		}
		if w.Kind != spec.KindNative {
			return api.Forbidden("kind", "a caller other than root may run only native workloads here (%s ones run code as root)", w.Kind)
		}
		if w.User == "" {
			return api.Forbidden("user", "is required of a caller other than root: one of %s", them)
		}
		a, err := execenv.Lookup(w.User)
		if err != nil || !allowed[a.UID] {
			return api.Forbidden("user", "%q is not a user a caller other than root may run as here (one of %s)", w.User, them)
		}
		return nil
	}, nil
}
