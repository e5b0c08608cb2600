package server

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/spec"
)

// PeerUsersPolicy is what --peer-users turns on. Without it the socket
// group is root-equivalent, as the docker group is: a member applies any
// spec, and flyd runs it as root. With it, list names the users that may
// be peers: a caller other than root may apply workloads only if it is
// one of them, and only native workloads that run as itself (its own
// uid, the boundary the kernel keeps between it and root and the other
// peers; an absent `user:` means itself, and is filled in with its name):
// never as root or another user, and never kind nix (whose builds run as
// root) or containerd (whose image's root is the host's), nor mount a
// host path into a container (flyd mounts it as root, and the path can
// change between apply and mount), nor watch files (flyd would read the
// tree as root); no host port below the kernel's unprivileged start
// (which root's servers take), at most maxPeerEndpoints endpoints a
// workload, and an identity in a workspace of its own, "uid-N" (the
// default for it), so that it never claims root's modules (private
// visibility) or registry names. The API holds it to the workloads it
// applied (caller.go), the supervisor to its networks and its share of
// ports.
func PeerUsersPolicy(list string) (func(Peer, *spec.Workload) error, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	allowed := map[uint32]string{} // uid: its name
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
			return nil, fmt.Errorf("--peer-users: %q is root, which is never a peer", name)
		}
		allowed[a.UID] = a.Name
		names = append(names, a.Name)
	}
	slices.Sort(names)
	them := strings.Join(names, ", ")
	return func(p Peer, w *spec.Workload) error {
		if p.UID == 0 {
			return nil
		}
		// Judged before the kind, and whatever it is: the rule stands
		// for the day containers open to peers.
		if c := w.Containerd; c != nil {
			for i, s := range c.Volumes {
				if v, err := spec.ParseVolume(s); err != nil || !v.Named() {
					return api.Forbidden(fmt.Sprintf("containerd.volumes[%d]", i), "%q: a caller other than root mounts no host path: flyd would mount it as root, whoever may read it", s)
				}
			}
		}
		if w.Watches() {
			return api.Forbidden("watching", "a caller other than root watches no files here: the daemon would read the tree as root on its behalf, and inotify follows a symlink that the tree's owner could swap in between a check and a watch")
		}
		if w.Kind != spec.KindNative {
			return api.Forbidden("kind", "a caller other than root may run only native workloads here (%s ones run code as root)", w.Kind)
		}
		self, ok := allowed[p.UID]
		if !ok {
			return api.Forbidden("user", "uid %d is not a peer user here (%s): a caller other than root runs workloads only as itself, and only when --peer-users names it", p.UID, them)
		}
		if w.User == "" {
			w.User = self
		} else if a, err := execenv.Lookup(w.User); err != nil || a.UID != p.UID {
			return api.Forbidden("user", "%q: a caller other than root runs its workloads as itself, %s (uid %d), or with no user: set", w.User, self, p.UID)
		}
		if len(w.Endpoints) > maxPeerEndpoints {
			return api.Forbidden("endpoints", "a caller other than root declares at most %d endpoints a workload", maxPeerEndpoints)
		}
		start := unprivilegedPortStart()
		for i, e := range w.Endpoints {
			if e.Publish.Mode == spec.PortFixed && e.Publish.Number < start {
				return api.Forbidden(fmt.Sprintf("endpoints[%d].publish", i), "%d is a privileged port (below %d, net.ipv4.ip_unprivileged_port_start): root's to publish", e.Publish.Number, start)
			}
			if e.Port.Mode == spec.PortFixed && e.Port.Number < start && (w.Network == "" || w.Network == spec.NetworkHost) {
				return api.Forbidden(fmt.Sprintf("endpoints[%d].port", i), "%d is a privileged port of the host (below %d, net.ipv4.ip_unprivileged_port_start): root's to hold", e.Port.Number, start)
			}
		}
		ws := spec.PeerWorkspace(p.UID)
		switch {
		case w.Identity == nil:
			w.Identity = &spec.Identity{Workspace: ws}
		case w.Identity.Workspace == "":
			w.Identity.Workspace = ws
		case w.Identity.Workspace != ws:
			return api.Forbidden("identity.workspace", "%q: a caller other than root works in its own workspace, %q", w.Identity.Workspace, ws)
		}
		// Its registry names are its workspace's too, and it never opts an
		// instance into the edge's routing, which names a public host.
		if r := w.Registry; r != nil {
			if r.Name != "" && !strings.HasPrefix(r.Name, ws+".") {
				return api.Forbidden("registry.name", "%q: a caller other than root registers under its workspace, %s.NAME", r.Name, ws)
			}
			if field := edgeLabel(r); field != "" {
				return api.Forbidden(field, "jet.domain routes a public host to the instance: root's to say")
			}
		}
		if w.Registry == nil {
			w.Registry = &spec.Registry{}
		}
		if w.Registry.Name == "" {
			w.Registry.Name = ws + "." + w.Name
		}
		return nil
	}, nil
}

// edgeLabel is the field of r that opts an instance into the edge's
// routing, "" when none does: a metadata key or a tag's key that is
// jet.domain once its case, its white space and its invisible characters
// are set aside, as a consumer more lenient than the contract might read
// it. A tag without "=" is a key too.
func edgeLabel(r *spec.Registry) string {
	for k := range r.Metadata {
		if labelKey(k) == "jet.domain" {
			return fmt.Sprintf("registry.metadata[%q]", k)
		}
	}
	for i, t := range r.Tags {
		k, _, _ := strings.Cut(t, "=")
		if labelKey(k) == "jet.domain" {
			return fmt.Sprintf("registry.tags[%d]", i)
		}
	}
	return ""
}

// labelKey is a label's key as judged: lower case, without white space or
// format characters (zero-width spaces and joiners) anywhere in it.
func labelKey(k string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, k))
}

// maxPeerEndpoints bounds the endpoints of a workload of a caller other
// than root.
const maxPeerEndpoints = 16

// unprivilegedPortStart is the first port any user may bind, 1024 unless
// the host says otherwise.
func unprivilegedPortStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1024
	}
	return n
}
