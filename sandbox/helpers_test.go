package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// hostNS is the namespace the process started in, read from the main
// thread before any test ran; every thread must be back in it outside Do.
var hostNS string

func TestMain(m *testing.M) {
	var err error
	if hostNS, err = os.Readlink("/proc/self/ns/net"); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}

// requireRoot skips a test that needs CAP_SYS_ADMIN, except in CI, where a
// skipped namespace test would be a hole in the coverage nobody sees.
func requireRoot(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "creating network namespaces and bind mounts needs root")
}

// newTestNetworks returns Networks over a fresh temporary directory and
// deletes whatever the test left in it.
func newTestNetworks(tb testing.TB) *Networks {
	tb.Helper()
	requireRoot(tb)
	return newTestNetworksIn(tb, tb.TempDir())
}

// newTestNetworksIn is newTestNetworks over dir, which the caller removes
// (its cleanup registered before this one's, so that it runs after).
func newTestNetworksIn(tb testing.TB, dir string) *Networks {
	tb.Helper()
	n, err := NewNetworks(dir)
	if err != nil {
		tb.Fatal(err)
	}
	// Registered after TempDir, so it runs before TempDir's removal, which
	// would fail with EBUSY on a mount left behind.
	tb.Cleanup(func() {
		names, err := n.List()
		if err != nil {
			tb.Error(err)
		}
		for _, name := range names {
			if err := n.Delete(name); err != nil {
				tb.Error(err)
			}
		}
		for _, m := range mountsUnder(tb, n.Dir()) {
			tb.Errorf("mount %s survived Delete", m)
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	})
	return n
}

// nsID is the namespace's identity as readlink of /proc/PID/ns/net shows it.
func nsID(tb testing.TB, path string) string {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

// threadNS is the namespace of whichever thread runs the caller right now.
func threadNS() (string, error) {
	return os.Readlink("/proc/thread-self/ns/net")
}

// taskNamespaces maps every thread of this process to its namespace.
func taskNamespaces(tb testing.TB) map[string]string {
	tb.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range tasks {
		link, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns/net"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		out[task.Name()] = link
	}
	return out
}

// mountsUnder lists the mount points at or below dir in this mount namespace.
func mountsUnder(tb testing.TB, dir string) []string {
	tb.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := mountinfoPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}
