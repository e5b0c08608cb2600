package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/errdefs"
)

// limitCases are limits and the control files they must produce, per
// cgroup version. They serve both the pure check of settings and the
// read-back from a real cgroup (where the kernel shows v1's "no memory
// limit" as the largest page multiple).
var limitCases = []struct {
	name   string
	l      Limits
	v1, v2 map[string]string
}{
	{"all set", Limits{MemoryMax: 64 << 20, CPUMax: 0.5, CPUWeight: 200, PidsMax: 100},
		map[string]string{"memory.limit_in_bytes": "67108864", "pids.max": "100", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000", "cpu.shares": "2048"},
		map[string]string{"memory.max": "67108864", "pids.max": "100", "cpu.max": "50000 100000", "cpu.weight": "200"}},
	{"none resets", Limits{},
		map[string]string{"memory.limit_in_bytes": "-1", "pids.max": "max", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1", "cpu.shares": "1024"},
		map[string]string{"memory.max": "max", "pids.max": "max", "cpu.max": "max 100000", "cpu.weight": "100"}},
	{"more than a core, least weight", Limits{CPUMax: 1.5, CPUWeight: 1},
		map[string]string{"memory.limit_in_bytes": "-1", "pids.max": "max", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "150000", "cpu.shares": "10"},
		map[string]string{"memory.max": "max", "pids.max": "max", "cpu.max": "150000 100000", "cpu.weight": "1"}},
	{"smallest cpu, most weight", Limits{CPUMax: 0.01, CPUWeight: 10000},
		map[string]string{"memory.limit_in_bytes": "-1", "pids.max": "max", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "1000", "cpu.shares": "102400"},
		map[string]string{"memory.max": "max", "pids.max": "max", "cpu.max": "1000 100000", "cpu.weight": "10000"}},
}

func TestLimitSettings(t *testing.T) {
	for _, tt := range limitCases {
		t.Run(tt.name, func(t *testing.T) {
			for version, want := range map[int]map[string]string{1: tt.v1, 2: tt.v2} {
				sets, err := tt.l.settings(version)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, s := range sets {
					got[s.file] = s.value
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("v%d: %v, want %v", version, got, want)
				}
			}
		})
	}
}

func TestLimitsWritten(t *testing.T) {
	for _, tl := range testLayouts(t) {
		if !hasControllers(tl.l) {
			t.Logf("%s has no controllers: TestUnenforceableLimitRefused covers it", tl.name)
			continue
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			// One cgroup through every case: each Create on it must leave
			// exactly that case's values, whatever the one before set.
			for _, tt := range limitCases {
				g, err := c.Create("limits", tt.l)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				want := tt.v2
				if c.Version() == 1 {
					want = tt.v1
				}
				resets := map[string]string{}
				for _, s := range mustSettings(t, Limits{}, c.Version()) {
					resets[s.file] = s.value
				}
				for file, value := range want {
					ctrl := file[:len(file)-len(filepath.Ext(file))]
					if g.dirFor(ctrl) == "" {
						// v1 leaves the hierarchy of a limit not set.
						if value != resets[file] {
							t.Errorf("%s: not in the %s hierarchy, but %s should be %q", tt.name, ctrl, file, value)
						}
						if _, err := os.Stat(filepath.Join(c.l.hier[slices.IndexFunc(c.l.hier, func(h hierarchy) bool { return h.ctrl == ctrl })].mount, c.parent, "limits")); err == nil {
							t.Errorf("%s: the %s hierarchy holds the cgroup, which has no such limit", tt.name, ctrl)
						}
						continue
					}
					if file == "memory.limit_in_bytes" && value == "-1" {
						value = "9223372036854771712" // -1 as the kernel shows it
					}
					if got := readCgroupValue(t, g, ctrl, file); got != value {
						t.Errorf("%s: %s = %q, want %q", tt.name, file, got, value)
					}
				}
			}
		})
	}
}

func TestUnenforceableLimitRefused(t *testing.T) {
	for _, tl := range testLayouts(t) {
		if hasControllers(tl.l) {
			t.Logf("%s has the controllers: TestLimitsWritten covers it", tl.name)
			continue
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			if _, err := c.Create("web", Limits{MemoryMax: 1 << 30}); !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("Create with a memory limit and no memory controller: err = %v, want ErrUnavailable", err)
			}
			if _, err := c.Create("web", Limits{}); err != nil {
				t.Fatalf("Create without limits: %v", err)
			}
			g := mustOpen(t, c, "web")
			if n, err := g.OOMKills(); n != 0 || err != nil {
				t.Fatalf("OOMKills() = %d, %v; want 0 without a memory controller", n, err)
			}
			if n, err := g.PidsRefusals(); n != 0 || err != nil {
				t.Fatalf("PidsRefusals() = %d, %v; want 0 without a pids controller", n, err)
			}
		})
	}
}

// A workload that allocates past its limit is OOM-killed, and OOMKills
// says so.
func TestMemoryMaxOOMKills(t *testing.T) {
	for _, tl := range testLayouts(t) {
		if !hasControllers(tl.l) {
			continue // TestUnenforceableLimitRefused covers it
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("hungry", Limits{MemoryMax: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := g.OOMKills(); n != 0 || err != nil {
				t.Fatalf("OOMKills() before = %d, %v", n, err)
			}
			cmd := helperCommand("alloc")
			var out strings.Builder
			cmd.Stdout = &out
			startIn(t, g, cmd)
			var exit *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("allocator ended with %v (%q), want SIGKILL", err, out.String())
			}
			if n, err := g.OOMKills(); n < 1 || err != nil {
				t.Fatalf("OOMKills() after = %d, %v; want at least 1", n, err)
			}
		})
	}
}

// Under pids_max a fork loop never exceeds the limit: forks fail with
// EAGAIN and the rest of the machine does not notice.
func TestPidsMaxContains(t *testing.T) {
	const limit = 20
	const script = `$| = 1; my ($ok, $again, $other) = (0, 0, 0);
for (1..60) {
	my $p = fork();
	if (!defined $p) { if ($!{EAGAIN}) { $again++ } else { $other++ } next }
	if ($p == 0) { sleep 300; exit 0 }
	$ok++;
}
print "$ok $again $other\n"; sleep 300;`
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Fatalf("this test forks from perl (Debian's perl-base): %v", err)
	}
	for _, tl := range testLayouts(t) {
		if !hasControllers(tl.l) {
			continue // TestUnenforceableLimitRefused covers it
		}
		t.Run(tl.name, func(t *testing.T) {
			c := newTestCgroups(t, tl.l)
			g, err := c.Create("forky", Limits{PidsMax: limit})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(perl, "-e", script)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			startIn(t, g, cmd)

			var most int
			var mu sync.Mutex
			stop := make(chan struct{})
			var sampler sync.WaitGroup
			sampler.Go(func() {
				for {
					if procs, err := g.Procs(); err == nil {
						mu.Lock()
						most = max(most, len(procs))
						mu.Unlock()
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			})
			line, err := bufio.NewReader(stdout).ReadString('\n')
			close(stop)
			sampler.Wait()
			if err != nil {
				t.Fatal(err)
			}
			var ok, again, other int
			if _, err := fmt.Sscan(line, &ok, &again, &other); err != nil {
				t.Fatalf("perl said %q: %v", line, err)
			}
			procs, err := g.Procs()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("forked %d, %d refused with EAGAIN; %d processes, at most %d seen", ok, again, len(procs), most)
			switch {
			case ok+1 > limit || len(procs) > limit || most > limit:
				t.Errorf("more than %d processes: %d forked, %d in the cgroup, at most %d seen", limit, ok, len(procs), most)
			case again == 0 || other != 0:
				t.Errorf("%d forks failed with EAGAIN and %d otherwise; want EAGAIN only", again, other)
			}
			// The sampler's reads fork nothing in the cgroup: every refusal is perl's.
			if n, err := g.PidsRefusals(); n != again || err != nil {
				t.Errorf("PidsRefusals() = %d, %v; perl saw %d", n, err, again)
			}
			if err := g.Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustSettings(t *testing.T, l Limits, version int) []setting {
	t.Helper()
	sets, err := l.settings(version)
	if err != nil {
		t.Fatal(err)
	}
	return sets
}
