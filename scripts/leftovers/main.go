// Command leftovers lists what flyd makes in the host's shared namespaces,
// one line each: nftables tables named flyd*, links named fly-*, cgroups
// named flyd* at the root of each hierarchy, the daemons' systemd scopes
// (flyd.slice/flyd*-workloads.scope) and flyd.slice itself, and network
// namespaces bound anywhere (flyd binds its own in run dirs). scripts/test runs it before
// and after the suite and fails on any line that was not there before:
// tests leave nothing on the host.
//
// With -suite DIR and -skip-held it lists only what the suite's own
// daemons may have made, so that the check passes beside other daemons
// (another flyd's, a container engine's) and still fails on a leak of the
// suite's own: the suite's daemons keep every path under DIR (its TMPDIR),
// so a namespace bound, or a link whose alias (its namespace's path) lies,
// outside DIR is another's (-suite); a table or cgroup named after a
// cgroup parent that a live daemon holds (its flock, read from /proc/locks,
// never taken) is that daemon's, and at the suite's end none of its own is
// alive (-skip-held, for the list after the suite: the one before lists
// them all, so that one of a daemon that stopped meanwhile is no news).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

func main() {
	suite := flag.String("suite", "", "list namespaces and links only under this directory")
	skipHeld := flag.Bool("skip-held", false, "leave out the tables and cgroups of the cgroup parents live daemons hold")
	flag.Parse()
	mine := func(path string) bool {
		return *suite == "" || path == *suite || strings.HasPrefix(path, strings.TrimSuffix(*suite, "/")+"/")
	}
	held := func(string) bool { return false }
	if *skipHeld {
		held = heldParents()
	}
	var out []string
	if c, err := nftables.New(); err == nil {
		if tables, err := c.ListTables(); err == nil {
			for _, t := range tables {
				if strings.HasPrefix(t.Name, "flyd") && !held(t.Name) {
					fam := map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6", nftables.TableFamilyINet: "inet"}[t.Family]
					out = append(out, fmt.Sprintf("nftables table %s %s", fam, t.Name))
				}
			}
		}
		_ = c.CloseLasting()
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "fly-") && mine(l.Attrs().Alias) {
				out = append(out, fmt.Sprintf("link %s (%s)", l.Attrs().Name, l.Attrs().Alias))
			}
		}
	}
	slice := false
	for _, p := range cgroupParents() {
		name := instanceOf(p)
		switch {
		case p == sliceDir:
			slice = true
		case held(name):
			if filepath.Dir(p) == sliceDir {
				sliceHeld = true // a live daemon's scope keeps the slice
			}
		default:
			out = append(out, "cgroup "+p)
		}
	}
	if slice && !sliceHeld {
		out = append(out, "cgroup "+sliceDir+" (flyd.slice)")
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			for i, fld := range fields {
				if fld == "-" && i+1 < len(fields) && fields[i+1] == "nsfs" && mine(fields[4]) {
					out = append(out, "network namespace bound at "+fields[4])
				}
			}
		}
		f.Close()
	}
	sort.Strings(out)
	for _, l := range out {
		fmt.Println(l)
	}
}

// sliceDir is flyd.slice's cgroup, where systemd keeps each daemon's
// scope on a cgroup v2 host it runs; sliceHeld is set once a live
// daemon's scope is seen in it.
const sliceDir = "/sys/fs/cgroup/flyd.slice"

var sliceHeld bool

// instanceOf is the daemon name (its nftables table's) that a cgroup
// parent is named after: flyd-HASH for flyd-HASH and for its scope,
// flyd-HASH-workloads.scope.
func instanceOf(dir string) string {
	return strings.TrimSuffix(filepath.Base(dir), "-workloads.scope")
}

// cgroupParents are the directories named flyd* at the root of each
// cgroup hierarchy, and the scopes in flyd.slice (on v2, where the second
// pattern meets the cgroups of systemd's units: flyd.service is not one).
func cgroupParents() []string {
	var out []string
	seen := map[string]bool{}
	for _, pattern := range []string{"/sys/fs/cgroup/flyd*", "/sys/fs/cgroup/*/flyd*", sliceDir + "/flyd*-workloads.scope"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if strings.HasSuffix(p, ".service") || seen[p] {
				continue
			}
			seen[p] = true
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}

// heldParents says whether a live daemon holds the cgroup parent of a
// name: a flock on its directory in some hierarchy, as /proc/locks lists
// it (by device and inode).
func heldParents() func(name string) bool {
	locked := map[string]bool{}
	if b, err := os.ReadFile("/proc/locks"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// 1: FLOCK  ADVISORY  WRITE 1234 00:1f:5678 0 EOF
			f := strings.Fields(line)
			if len(f) >= 6 && f[1] == "FLOCK" {
				locked[f[5]] = true
			}
		}
	}
	heldName := map[string]bool{}
	for _, p := range cgroupParents() {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue
		}
		maj, min := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
		key := fmt.Sprintf("%02x:%02x:%s", maj, min, strconv.FormatUint(st.Ino, 10))
		if locked[key] {
			heldName[instanceOf(p)] = true
		}
	}
	return func(name string) bool { return heldName[name] }
}
