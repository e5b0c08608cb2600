package mounts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/spec"
)

// A network's runs share one network namespace, where each workload of
// the network listens on 127.0.0.1: its /etc/hosts names them there, so
// that `postgres://db:5432` reaches db as it would under docker compose.
// The file is the network's, under the state dir (hosts/NETWORK), bound
// read-only at /etc/hosts in each of its runs: a host run's mount
// namespace (sandbox.StartWithMounts), a container's OCI mounts. It is
// written at the network's first run, again whenever what it names
// changes (a workload applied in the network or removed from it: at the
// apply, at the removal, at a run's start or end), and removed after the
// network's last run ended.
//
// A bind holds the file, not its name: a new file renamed over it would
// not reach the runs already started. So it is rewritten in place, in one
// write from its start; a shorter text is first written padded with a
// comment to the old length, then cut, so that a reader finds whole
// lines of the old text or of the new.

// Names is what a network's hosts file names: the workloads declared in
// the network, each with the group it is a replica of ("" for none).
type Names func(network string) map[string]string

// keptHosts is the field of a run's record that names its network's hosts
// file, for the daemon that adopts it.
const keptHosts = "hosts"

// HostName is the name a container reaches the host by (the host's end
// of the network's link), which a container's /etc/hosts has always
// given (driver/containerd): the network's file keeps it.
const HostName = "host.docker.internal"

// hostsFiles are the networks' hosts files under dir.
type hostsFiles struct {
	dir   string
	names Names

	// mu guards refs, gateways and written, and is held while a file is
	// written or removed.
	mu       sync.Mutex
	refs     map[string]int        // by network: the runs that bind its file
	gateways map[string]netip.Addr // by network: the host's end of its link
	// written is each file's text as last written, so that a run's start
	// that changes nothing reads no file.
	written map[string][]byte
}

// HostsFile is network's /etc/hosts for its runs while one of them has
// it, or "".
func (h *Hook) HostsFile(network string) string {
	if h == nil || h.hosts == nil {
		return ""
	}
	h.hosts.mu.Lock()
	defer h.hosts.mu.Unlock()
	if h.hosts.refs[network] == 0 {
		return ""
	}
	return h.hosts.path(network)
}

// path is network's hosts file.
func (h *hostsFiles) path(network string) string { return filepath.Join(h.dir, network) }

// networkOf is the network of a hosts file of h's, "" for any other path.
func (h *hostsFiles) networkOf(path string) string {
	if h == nil || filepath.Dir(path) != filepath.Clean(h.dir) {
		return ""
	}
	return filepath.Base(path)
}

// acquire holds network's file for one run, writing it as it must be
// now; gateway is the host's end of its link, if the run knows it.
func (h *hostsFiles) acquire(network string, gateway netip.Addr) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gateway.IsValid() {
		h.gateways[network] = gateway
	}
	if err := h.writeLocked(network, ""); err != nil {
		return "", fmt.Errorf("/etc/hosts of network %s: %w", network, err)
	}
	h.refs[network]++
	return h.path(network), nil
}

// hold counts a run of an earlier daemon that binds network's file, and
// writes it again: what it names may have changed while no daemon ran.
func (h *hostsFiles) hold(network string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs[network]++
	return h.writeLocked(network, "")
}

// release lets go of one run's hold: after the last, the file is
// removed; else it is written again, its workloads as they are now.
func (h *hostsFiles) release(network string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs[network] == 0 {
		return nil
	}
	if h.refs[network]--; h.refs[network] > 0 {
		return h.writeLocked(network, "")
	}
	delete(h.refs, network)
	delete(h.gateways, network)
	delete(h.written, network)
	if err := os.Remove(h.path(network)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// forget writes again the file of network, which gone, a workload
// removed from it, no longer names: nothing when no run binds it.
func (h *hostsFiles) forget(network, gone string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs[network] == 0 {
		return nil
	}
	return h.writeLocked(network, gone)
}

// sweep removes the files no run binds and keep does not name: what a
// daemon that was killed left.
func (h *hostsFiles) sweep(keep map[string]bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ents, err := os.ReadDir(h.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		if p := h.path(e.Name()); h.refs[e.Name()] == 0 && !keep[p] {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// writeLocked writes network's file as it must be now, without gone;
// unchanged, it is not written.
func (h *hostsFiles) writeLocked(network, gone string) error {
	path := h.path(network)
	gateway, ok := h.gateways[network]
	if !ok {
		// After a daemon restart, until a run of the network starts, the
		// link's address is the file's.
		old, _ := os.ReadFile(path)
		gateway = gatewayIn(old)
	}
	names := h.names(network)
	delete(names, gone)
	own, err := os.ReadFile("/etc/hosts")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	text := hostsText(network, names, gateway, own)
	if last, ok := h.written[network]; ok && bytes.Equal(last, text) {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	old, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if !bytes.Equal(text, old) {
		if err := rewrite(f, old, text); err != nil {
			return err
		}
	}
	h.written[network] = text
	return nil
}

// rewrite writes text over f, whose content is old, in place.
func rewrite(f *os.File, old, text []byte) error {
	out := text
	if pad := len(old) - len(text); pad > 0 {
		out = append(slices.Clip(text), padding(pad)...)
	}
	if _, err := f.WriteAt(out, 0); err != nil {
		return err
	}
	if len(out) > len(text) {
		return f.Truncate(int64(len(text)))
	}
	return nil
}

// padding is n bytes that end a hosts file as a comment.
func padding(n int) []byte {
	if n == 1 {
		return []byte("\n")
	}
	return []byte("#" + strings.Repeat(" ", n-2) + "\n")
}

// hostsText is the hosts file of network: localhost, its workloads (and
// groups) at 127.0.0.1 by their names as their project writes them and by
// their full names, the host's end of its link as HostName, then the
// host's own entries.
func hostsText(network string, names map[string]string, gateway netip.Addr, own []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# /etc/hosts of the runs of network %s, written by flyd: its workloads, then this host's entries.\n", network)
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	all := map[string]bool{}
	for name, group := range names {
		all[name] = true
		if group != "" {
			all[group] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		b.WriteString("127.0.0.1\t")
		if bare := spec.BareName(name); bare != name {
			b.WriteString(bare + " ")
		}
		b.WriteString(name + "\n")
	}
	if gateway.IsValid() {
		b.WriteString(gateway.String() + "\t" + HostName + "\n")
	}
	if len(own) > 0 {
		b.WriteString("# this host's /etc/hosts:\n")
		b.Write(own)
		if own[len(own)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// gatewayIn is the address a hosts file of ours gives HostName.
func gatewayIn(text []byte) netip.Addr {
	for line := range strings.SplitSeq(string(text), "\n") {
		if addr, name, ok := strings.Cut(line, "\t"); ok && name == HostName {
			if a, err := netip.ParseAddr(addr); err == nil {
				return a
			}
		}
	}
	return netip.Addr{}
}
