package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/flyd-dev/flyd/firewall"
	"github.com/flyd-dev/flyd/internal/instance"
)

// cgroupParent is the daemon's --cgroup-parent: one per daemon directory,
// so daemons of parallel tests never sweep each other's cgroups, and a
// daemon restarted on the same directory finds its workloads' cgroups.
func cgroupParent(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "flyd-it-" + hex.EncodeToString(sum[:6])
}

// cgroupDirs lists the daemon's parent cgroup in every mounted hierarchy.
func cgroupDirs(parent string) []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/" + parent, "/sys/fs/cgroup/*/" + parent} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	return dirs
}

// workloadCgroups lists the workload cgroups under the daemon's parent.
func workloadCgroups(parent string) []string {
	var out []string
	for _, d := range cgroupDirs(parent) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

// checkAndRemoveCgroups fails the test if removing every workload left a
// cgroup, carrier, network namespace or port reservation behind, then
// removes the daemon's parent cgroup. A daemon that
// was killed on purpose may leave cgroups to its successor; the last
// cleanup of the directory removes them.
func (d *daemon) checkAndRemoveCgroups(removedAll bool) {
	parent := cgroupParent(d.dir)
	left := workloadCgroups(parent)
	if removedAll && !anotherDaemonRuns(d) {
		if len(left) > 0 {
			d.t.Errorf("cgroups left after every workload was removed: %v", left)
		}
		// Nor a carrier, a network namespace or a port reservation.
		for _, sub := range []string{"carriers", "netns", "ports"} {
			entries, _ := os.ReadDir(filepath.Join(d.runDir, sub))
			for _, e := range entries {
				if e.Name() != ".lock" {
					d.t.Errorf("%s/%s left after every workload was removed", sub, e.Name())
				}
			}
		}
	}
	if anotherDaemonRuns(d) {
		return
	}
	d.checkAndRemoveNetworking(removedAll)
	for _, c := range left {
		_ = os.Remove(c)
	}
	for _, p := range cgroupDirs(parent) {
		_ = os.Remove(p)
	}
}

// checkAndRemoveNetworking fails the test if a daemon that removed every
// workload left its nftables table or a link behind, then removes both,
// as for a daemon killed or stopped on purpose with workloads: the host
// keeps nothing of a test.
func (d *daemon) checkAndRemoveNetworking(removedAll bool) {
	table := instance.Name(d.runDir)
	if ok, _, err := firewall.Exists(table); err == nil && ok {
		if removedAll {
			d.t.Errorf("nftables table %s left after every workload was removed", table)
		}
		if err := firewall.Purge(table); err != nil {
			d.t.Errorf("cleanup: %v", err)
		}
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if !strings.HasPrefix(l.Attrs().Alias, d.runDir+"/") {
			continue
		}
		if removedAll {
			d.t.Errorf("link %s (%s) left after every workload was removed", l.Attrs().Name, l.Attrs().Alias)
		}
		if err := netlink.LinkDel(l); err != nil {
			d.t.Errorf("cleanup: %v", err)
		}
	}
}
