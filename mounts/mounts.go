// Package mounts gives the runs of host workloads (native, Nix) what they
// see in place of the host's, in a mount namespace of each run's own:
//
//   - a project's /dev/shm, as the containers of a pod share one: a tmpfs
//     made at the project's first run, bound at /dev/shm in each of its
//     runs, invisible to the host and to every other project, and gone,
//     with its files, once the project's last run ended (a down ends them
//     all); the default project's runs keep the host's;
//   - a run's own /tmp and /var/tmp, for a workload whose spec asks
//     (private_tmp, systemd's PrivateTmp=): empty at its start, removed at
//     its end;
//   - for a run in an isolated network, container or not, the network's
//     /etc/hosts, which names its workloads at 127.0.0.1 (hosts.go).
//
// Its hook (Hook) holds them for each run; the tmpfs is sandbox's
// (sandbox.Shms), and the binding too (sandbox.StartWithMounts).
// Containers have a /dev/shm and a /tmp of their own, and keep them; the
// network's /etc/hosts is one of their OCI mounts (driver/containerd).
package mounts

import (
	"context"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/flyd-dev/flyd/runhook"
	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/spec"
)

// keptTmp is the field of a run's record that names its own /tmp's
// directory, for the daemon that adopts it to remove at its end.
const keptTmp = "private_tmp"

// Hook holds a project's /dev/shm and a run's own /tmp for each host run,
// and its network's /etc/hosts for each run in an isolated network.
type Hook struct {
	shms    *sandbox.Shms
	tmpRoot string
	hosts   *hostsFiles
	log     *zap.Logger

	// mu guards tmps, the runs' own /tmp directories held now, and is
	// held through a sweep's removals, so that a hold waits for them; the
	// projects' /dev/shm are shms' (its own lock), never taken under mu.
	mu   sync.Mutex
	tmps map[string]bool
}

// NewHook keeps the projects' /dev/shm in shms (nil: every run has the
// host's), and under stateDir the runs' own /tmp (tmp/) and the networks'
// /etc/hosts (hosts/), which name what names says (nil: every run has the
// host's).
func NewHook(shms *sandbox.Shms, stateDir string, names Names, log *zap.Logger) *Hook {
	h := &Hook{shms: shms, tmpRoot: filepath.Join(stateDir, "tmp"), log: log, tmps: map[string]bool{}}
	if names != nil {
		h.hosts = &hostsFiles{dir: filepath.Join(stateDir, "hosts"), names: names,
			refs: map[string]int{}, gateways: map[string]netip.Addr{}, written: map[string][]byte{}}
	}
	return h
}

// Name is the hook's: "mounts".
func (h *Hook) Name() string { return "mounts" }

// onHost says whether r runs on the host, where its mounts are flyd's to
// give: by its spec's runtime, which an adopted run has as a new one does.
func onHost(r *runhook.Run) bool {
	if r.Task.Spec == nil {
		return false
	}
	rt, ok := spec.RuntimeOf(r.Task.Spec.Kind)
	return ok && !rt.InContainer && !rt.RunsNothing
}

// network is the isolated network whose /etc/hosts r gets, or "": a run
// of the host's network keeps the host's.
func (h *Hook) network(r *runhook.Run) string {
	if h.hosts == nil || r.Task.Spec == nil || r.Task.Spec.Network == spec.NetworkHost || r.Task.Spec.Network == "" {
		return ""
	}
	if rt, ok := spec.RuntimeOf(r.Task.Spec.Kind); !ok || rt.RunsNothing {
		return ""
	}
	return r.Task.Spec.Network
}

// project is the project whose /dev/shm r gets, or "".
func (h *Hook) project(r *runhook.Run) string {
	if h.shms == nil || !onHost(r) {
		return ""
	}
	return spec.ProjectOf(r.Task.Workload)
}

// Prestart holds the run's project's /dev/shm, makes its own /tmp when
// its spec asks, holds its network's /etc/hosts, and tells the runtime
// where they are.
func (h *Hook) Prestart(ctx context.Context, r *runhook.Run) error {
	if p := h.project(r); p != "" {
		dir, err := h.shms.Acquire(p)
		if err != nil {
			return err
		}
		r.Task.Mounts.Shm = dir
	}
	if onHost(r) && r.Task.Spec.PrivateTmp {
		dir, err := sandbox.MakeTmp(h.tmpRoot, strings.ReplaceAll(r.Task.Workload, ".", "_"))
		if err != nil {
			h.Exited(ctx, r)
			return err
		}
		r.Task.Mounts.Tmp = dir
		r.Kept.Set(keptTmp, dir)
		h.hold(dir)
	}
	if n := h.network(r); n != "" {
		var gateway netip.Addr
		if nw := r.Task.Network; nw != nil && nw.Link != nil {
			gateway = nw.Link.Host
		}
		file, err := h.hosts.acquire(n, gateway)
		if err != nil {
			h.Exited(ctx, r)
			return err
		}
		r.Task.Mounts.Hosts = file
		r.Kept.Set(keptHosts, file)
	}
	return nil
}

// Adopt counts a run an earlier daemon started, which holds its
// project's /dev/shm in its mount namespace, its own /tmp and its
// network's /etc/hosts, and tells the run where they are, for what runs
// beside it as it sees them (its exec checks).
func (h *Hook) Adopt(_ context.Context, r *runhook.Run) {
	if p := h.project(r); p != "" {
		h.shms.Hold(p)
		r.Task.Mounts.Shm = h.shms.Dir(p)
	}
	if dir := h.tmpOf(r); dir != "" {
		h.hold(dir)
		r.Task.Mounts.Tmp = dir
	}
	if n := h.hostsOf(r); n != "" {
		if err := h.hosts.hold(n); err != nil {
			h.log.Warn("a network's /etc/hosts is not written again", zap.String("network", n), zap.Error(err))
		}
		r.Kept.Get(keptHosts, &r.Task.Mounts.Hosts)
	}
}

// Exited lets the run's holds go: the project's last run takes its
// /dev/shm with it, and the run's own /tmp goes with the run.
func (h *Hook) Exited(_ context.Context, r *runhook.Run) {
	if p := h.project(r); p != "" {
		if err := h.shms.Release(p); err != nil {
			h.log.Warn("a project's /dev/shm outlives its last run", zap.String("project", p), zap.Error(err))
		}
	}
	if dir := h.tmpOf(r); dir != "" {
		h.mu.Lock()
		delete(h.tmps, dir)
		h.mu.Unlock()
		if err := os.RemoveAll(dir); err != nil {
			h.log.Warn("a run's own /tmp outlives it", zap.String("workload", r.Task.Workload), zap.Error(err))
		}
	}
	if n := h.hostsOf(r); n != "" {
		r.Kept.Set(keptHosts, nil)
		if err := h.hosts.release(n); err != nil {
			h.log.Warn("a network's /etc/hosts is not written again or removed", zap.String("network", n), zap.Error(err))
		}
	}
}

// Destroy writes again the /etc/hosts of the network the removed workload
// was in, without it, while other runs bind it.
func (h *Hook) Destroy(_ context.Context, workload string) {
	if h.hosts == nil {
		return
	}
	h.hosts.mu.Lock()
	networks := slices.Collect(maps.Keys(h.hosts.refs))
	h.hosts.mu.Unlock()
	for _, n := range networks {
		if err := h.hosts.forget(n, workload); err != nil {
			h.log.Warn("a network's /etc/hosts is not written again", zap.String("network", n), zap.Error(err))
		}
	}
}

// Named writes again the /etc/hosts of network, while runs bind it, for
// the workloads applied in it now: a workload is named from its apply,
// not from the next run's start in the network.
func (h *Hook) Named(network string) {
	if h.hosts == nil || network == "" || network == spec.NetworkHost {
		return
	}
	if err := h.hosts.forget(network, ""); err != nil {
		h.log.Warn("a network's /etc/hosts is not written again", zap.String("network", network), zap.Error(err))
	}
}

// hostsOf is the network whose /etc/hosts r binds, as its record keeps
// it: a file under the hook's directory alone.
func (h *Hook) hostsOf(r *runhook.Run) string {
	var file string
	if h.hosts == nil || !r.Kept.Get(keptHosts, &file) {
		return ""
	}
	return h.hosts.networkOf(file)
}

func (h *Hook) hold(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tmps[dir] = true
}

// tmpOf is the directory of r's own /tmp, as its record keeps it: one
// under the hook's root alone.
func (h *Hook) tmpOf(r *runhook.Run) string {
	var dir string
	if !r.Kept.Get(keptTmp, &dir) || filepath.Dir(dir) != filepath.Clean(h.tmpRoot) {
		return ""
	}
	return dir
}

// Live is a run of an earlier daemon that lives on: what its record
// keeps says which of its mounts it holds.
type Live struct {
	Workload string
	Kept     runhook.Kept
}

// Sweep removes the /dev/shm, the /tmp and the /etc/hosts that none of
// live holds: what a daemon that was killed left. It is called once the
// runs of an earlier daemon are known and before any is adopted or
// started: a project of a live run keeps its /dev/shm (a host run's or
// not: a run of another kind keeps nothing of it mounted), a live run its
// /tmp and its network's /etc/hosts.
func (h *Hook) Sweep(live []Live) {
	projects, tmps, hosts := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, l := range live {
		projects[spec.ProjectOf(l.Workload)] = true
		var dir, file string
		if l.Kept.Get(keptTmp, &dir) {
			tmps[dir] = true
		}
		if l.Kept.Get(keptHosts, &file) {
			hosts[file] = true
		}
	}
	if h.shms != nil {
		if err := h.shms.Sweep(projects); err != nil {
			h.log.Warn("projects' /dev/shm that no run holds are left", zap.Error(err))
		}
	}
	if h.hosts != nil {
		if err := h.hosts.sweep(hosts); err != nil {
			h.log.Warn("networks' /etc/hosts that no run binds are left", zap.Error(err))
		}
	}
	ents, err := os.ReadDir(h.tmpRoot)
	if err != nil {
		return
	}
	for _, e := range ents {
		if dir := filepath.Join(h.tmpRoot, e.Name()); !tmps[dir] {
			if err := os.RemoveAll(dir); err != nil {
				h.log.Warn("a run's own /tmp that no run holds is left", zap.String("dir", dir), zap.Error(err))
			}
		}
	}
}
