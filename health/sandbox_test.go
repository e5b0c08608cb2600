package health

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/sandbox"
	"github.com/flyd-dev/flyd/sandbox/cgtest"
)

// testCgroup is an empty cgroup under a parent of this test's own, both
// removed at the end of the test.
func testCgroup(t *testing.T) *sandbox.Cgroup {
	t.Helper()
	requireRoot(t)
	_, g := cgtest.New(t, "probe", sandbox.Limits{})
	return g
}

// TestExecSandboxed: the command is born inside the network and the
// cgroup it is given, and in neither when given none.
func TestExecSandboxed(t *testing.T) {
	nw := testNetwork(t)
	g := testCgroup(t)
	ns := fmt.Sprintf("net:[%d]", inode(t, nw.Path))
	// $1: the network namespace; $2: the cgroup path, as /proc shows it.
	script := `
		in_ns=no; [ "$(readlink /proc/self/ns/net)" = "$1" ] && in_ns=yes
		in_cg=no; grep -q ":$2\$" /proc/self/cgroup && in_cg=yes
		[ "$in_ns/$in_cg" = "$3" ]`
	tests := []struct {
		name string
		nw   *sandbox.Network
		cg   *sandbox.Cgroup
		want string
	}{
		{"neither", nil, nil, "no/no"},
		{"network", nw, nil, "yes/no"},
		{"cgroup", nil, g, "no/yes"},
		{"both", nw, g, "yes/yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := []string{"/bin/sh", "-c", script, "sh", ns, g.CgroupsPath(), tt.want}
			if err, _ := check(Exec(tt.nw, tt.cg, sandbox.Mounts{}, nil, argv, testEnv), 2*time.Second); err != nil {
				t.Fatalf("Check = %v, want the command born in %s (network/cgroup)", err, tt.want)
			}
		})
	}
	procs, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) > 0 {
		t.Fatalf("processes left in the cgroup: %v", procs)
	}
}

// TestExecSeesTheRunsMounts: a check sees what its run sees in place of
// the host's: the network's /etc/hosts, here naming db; the host's stays
// as it was.
func TestExecSeesTheRunsMounts(t *testing.T) {
	requireRoot(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n127.0.0.1\tdb-of-the-check\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{"/bin/sh", "-c", "grep -q db-of-the-check /etc/hosts"}
	if err, _ := check(Exec(nil, nil, sandbox.Mounts{Hosts: hosts}, nil, argv, testEnv), 2*time.Second); err != nil {
		t.Errorf("a check given the run's hosts file does not see it: %v", err)
	}
	if err, _ := check(Exec(nil, nil, sandbox.Mounts{}, nil, argv, testEnv), 2*time.Second); err == nil {
		t.Errorf("a check given no mounts sees the run's hosts file: the host's /etc/hosts names db-of-the-check")
	}
}
