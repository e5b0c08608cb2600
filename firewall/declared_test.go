package firewall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/flyd-dev/flyd/internal/testenv"
	"github.com/flyd-dev/flyd/sandbox"
)

const reachHelperEnv = "FLYD_FIREWALL_REACH_HELPER"

// TestReachHelperProcess is not a test: re-executed with reachHelperEnv
// set to an address, it connects there once and says how it went.
func TestReachHelperProcess(t *testing.T) {
	addr := os.Getenv(reachHelperEnv)
	if addr == "" {
		return
	}
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	took := time.Since(start)
	switch {
	case err == nil:
		c.Close()
		fmt.Printf("ok %d\n", took.Microseconds())
	case errors.Is(err, syscall.ECONNREFUSED):
		fmt.Printf("refused %d\n", took.Microseconds())
	default:
		fmt.Printf("error %d %v\n", took.Microseconds(), err)
	}
	os.Exit(0)
}

// reachLab is a namespace, a listener in it, and workload cgroups whose
// processes connect.
type reachLab struct {
	t    testing.TB
	nw   *sandbox.Network
	cgs  *sandbox.Cgroups
	tree ReachTree
	port int
	// remote is a second listener, at 198.18.251.1 (on loopback, as a
	// gateway would be beyond it): a destination by address.
	remote int
}

var labs atomic.Int64

func newReachLab(t testing.TB) *reachLab {
	t.Helper()
	testenv.RequireRoot(t, "namespaces, cgroups and rules are the kernel's")
	cgs, err := sandbox.NewCgroups(fmt.Sprintf("flyd-test-reach-%d-%d", os.Getpid(), labs.Add(1)))
	if err != nil {
		testenv.Skip(t, err.Error())
	}
	st, err := cgs.SocketTree()
	if err != nil {
		testenv.Skip(t, err.Error())
	}
	nets, err := sandbox.NewNetworks(filepath.Join(t.TempDir(), "netns"))
	if err != nil {
		t.Fatal(err)
	}
	nw, err := nets.Ensure("reach")
	if err != nil {
		t.Fatal(err)
	}
	l := &reachLab{t: t, nw: nw, cgs: cgs, tree: ReachTree{Parent: st.Parent, Level: st.ParentLevel}}
	var ln, rln net.Listener
	if err := nw.Do(func() error {
		// A second address, for a destination beyond loopback.
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: netlink.NewIPNet(net.ParseIP("198.18.251.1"))})
		}
		if err == nil {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err == nil {
			rln, err = net.Listen("tcp", "198.18.251.1:0")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	l.port, l.remote = ln.Addr().(*net.TCPAddr).Port, rln.Addr().(*net.TCPAddr).Port
	for _, s := range []net.Listener{ln, rln} {
		go func() {
			for {
				c, err := s.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	t.Cleanup(func() {
		ln.Close()
		rln.Close()
		if err := nets.Delete("reach"); err != nil {
			t.Error(err)
		}
		names, _ := cgs.List()
		for _, n := range names {
			if g, err := cgs.Open(n); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = g.Kill(ctx)
				cancel()
				if err := g.Delete(); err != nil {
					t.Error(err)
				}
			}
		}
		if err := cgs.RemoveParent(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// workload makes a workload cgroup and returns its socket id.
func (l *reachLab) workload(name string) uint64 {
	l.t.Helper()
	if _, err := l.cgs.Create(name, sandbox.Limits{}); err != nil {
		l.t.Fatal(err)
	}
	id, err := l.cgs.SocketID(name)
	if err != nil {
		l.t.Fatal(err)
	}
	return id
}

// connect has a process of workload name (or, "", of no workload)
// connect to addr inside the namespace, and says "ok" or "refused" and how
// long it took.
func (l *reachLab) connect(name, addr string) (string, time.Duration) {
	l.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReachHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), reachHelperEnv+"="+addr)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	var g *sandbox.Cgroup
	if name != "" {
		var err error
		if g, err = l.cgs.Open(name); err != nil {
			l.t.Fatal(err)
		}
	}
	if err := sandbox.Start(l.nw, g, cmd.SysProcAttr, cmd.Start); err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		l.t.Fatalf("%s: %v (%s)", name, err, out.String())
	}
	f := strings.Fields(out.String())
	if len(f) < 2 {
		l.t.Fatalf("%s: helper said %q", name, out.String())
	}
	us, _ := strconv.Atoi(f[1])
	return f[0], time.Duration(us) * time.Microsecond
}

// Declared reach inside one namespace: the workloads allowed a port
// reach it, another workload is refused at once, a process that is no
// workload is never refused; a grant takes effect at the next connect,
// the kernel counts each refusal by cgroup and destination, and a new
// firewall (a restarted daemon) that asks for the same takes the table as
// it is, its counts included.
func TestDeclaredReach(t *testing.T) {
	f, table := testFirewall(t)
	l := newReachLab(t)
	app, side := l.workload("app"), l.workload("side")
	local := "127.0.0.1:" + strconv.Itoa(l.port)
	remote := "198.18.251.1:" + strconv.Itoa(l.remote)
	tbl := func(allowed ...uint64) []ReachTable {
		return []ReachTable{{NS: l.nw.Path,
			Local:  []LocalDest{{Port: l.port, Allowed: allowed}},
			Remote: []RemoteDest{{Addr: netip.MustParseAddr("198.18.251.1"), Port: l.remote, Allowed: allowed}}}}
	}
	if err := f.SetReach(l.tree, tbl(app)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ who, addr, want string }{
		{"app", local, "ok"}, {"app", remote, "ok"}, {"side", local, "refused"}, {"side", remote, "refused"},
		{"", local, "ok"}, {"", remote, "ok"},
	} {
		got, took := l.connect(tt.who, tt.addr)
		if got != tt.want {
			t.Errorf("%q to %s: %s, want %s", tt.who, tt.addr, got, tt.want)
		}
		if got == "refused" && took > 500*time.Millisecond {
			t.Errorf("%q to %s: refused after %v, want at once", tt.who, tt.addr, took)
		}
	}
	refusals, err := f.Refusals()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		fmt.Sprintf("%d invalid IP %d", side, l.port):     true,
		fmt.Sprintf("%d 198.18.251.1 %d", side, l.remote): true,
	}
	for _, r := range refusals {
		k := fmt.Sprintf("%d %v %d", r.Cgroup, r.Addr, r.Port)
		if r.NS != l.nw.Path || !want[k] || r.Count != 1 {
			t.Errorf("refusal %+v (%s) not expected", r, k)
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("refusals %v not counted (got %+v)", want, refusals)
	}

	// A new firewall asking the same writes nothing: the counts stay.
	f2, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := f2.SetReach(l.tree, tbl(app)); err != nil {
		t.Fatal(err)
	}
	if rs, err := f2.Refusals(); err != nil || len(rs) != 2 {
		t.Errorf("after a restart: refusals %+v, %v; want the 2 counted before", rs, err)
	}
	// A grant: side's next connect passes.
	if err := f2.SetReach(l.tree, tbl(app, side)); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.connect("side", local); got != "ok" {
		t.Errorf("side after its grant: %s", got)
	}
	if err := f2.SetReach(l.tree, tbl(side)); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.connect("app", remote); got != "refused" {
		t.Errorf("app after its grant went: %s", got)
	}
	// Nothing under declared reach: no table.
	if err := f2.SetReach(l.tree, []ReachTable{{NS: l.nw.Path}}); err != nil {
		t.Fatal(err)
	}
	if ns := f2.ReachNamespaces(); len(ns) != 0 {
		t.Errorf("reach tables left in %v", ns)
	}
	if got, _ := l.connect("app", local); got != "ok" {
		t.Errorf("app with no reach table: %s", got)
	}
}

// A table of 1,000 endpoints with 4 cgroups allowed each (more elements
// than one netlink attribute holds) is written, read back whole by a new
// firewall, and changed by one element.
func TestDeclaredReachMany(t *testing.T) {
	f, table := testFirewall(t)
	l := newReachLab(t)
	tb := ReachTable{NS: l.nw.Path}
	for i := range 1000 {
		tb.Local = append(tb.Local, LocalDest{Port: 20000 + i, Allowed: []uint64{uint64(5 + i), uint64(10005 + i), uint64(20005 + i), uint64(30005 + i)}})
	}
	if err := f.SetReach(l.tree, []ReachTable{tb}); err != nil {
		t.Fatal(err)
	}
	f2, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	tb.Local[0].Allowed = append(tb.Local[0].Allowed, 99)
	if err := f2.SetReach(l.tree, []ReachTable{tb}); err != nil {
		t.Fatal(err)
	}
	if got := len(f2.reach[l.nw.Path].sets[setLocalAllowed]); got != 4001 {
		t.Errorf("%d cgroups allowed, want 4001", got)
	}
}
