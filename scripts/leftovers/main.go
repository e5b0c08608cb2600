// Command leftovers lists what flyd makes in the host's shared namespaces,
// one line each: nftables tables named flyd*, links named fly-*, cgroups
// named flyd* at the root of each hierarchy, and network namespaces bound
// anywhere (flyd binds its own in run dirs). scripts/test runs it before
// and after the suite and fails on any line that was not there before:
// tests leave nothing on the host.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

func main() {
	var out []string
	if c, err := nftables.New(); err == nil {
		if tables, err := c.ListTables(); err == nil {
			for _, t := range tables {
				if strings.HasPrefix(t.Name, "flyd") {
					fam := map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6", nftables.TableFamilyINet: "inet"}[t.Family]
					out = append(out, fmt.Sprintf("nftables table %s %s", fam, t.Name))
				}
			}
		}
		_ = c.CloseLasting()
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "fly-") {
				out = append(out, fmt.Sprintf("link %s (%s)", l.Attrs().Name, l.Attrs().Alias))
			}
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/flyd*", "/sys/fs/cgroup/*/flyd*"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, "cgroup "+p)
			}
		}
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			for i, fld := range fields {
				if fld == "-" && i+1 < len(fields) && fields[i+1] == "nsfs" {
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
