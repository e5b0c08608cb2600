package connectmap

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// The kernel does not run this program type under BPF_PROG_TEST_RUN
// (6.18: "not supported"), so the tests attach the programs at a cgroup
// of their own and connect from a copy of the test binary born into it
// (helper, below): the host's other processes are never rewritten.

func TestMain(m *testing.M) {
	if os.Getenv("CONNECTMAP_HELPER") != "" {
		os.Exit(helper(os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// helper connects as told by its argument, "tcp|udp|bound|netns ADDR",
// and prints the peer the socket names and the line the server sends (or
// the error).
func helper(arg string) int {
	mode, addr, _ := strings.Cut(arg, " ")
	if mode == "netns" {
		// A namespace of its own: loopback up, and a server of its own at
		// the address the map rewrites on the host. Unshared by this
		// thread alone, which the listen, the ip command and the dial
		// must all come from.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			fmt.Println("error:", err)
			return 0
		}
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			fmt.Println("error:", err, string(out))
			return 0
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error:", err)
			return 0
		}
		go serve(ln, "own")
		mode = "tcp"
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	network := "tcp"
	switch mode {
	case "udp":
		network = "udp"
	case "bound":
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	}
	c, err := d.Dial(network, addr)
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	defer c.Close()
	if network == "udp" {
		fmt.Println("peer", c.RemoteAddr())
		return 0
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("peer", c.RemoteAddr(), "error:", err)
		return 0
	}
	fmt.Println("peer", c.RemoteAddr(), "said", strings.TrimSpace(line))
	return 0
}

func serve(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, name)
		c.Close()
	}
}

// testCgroup makes a cgroup in the unified tree, removed when the test
// ends, and returns its path and an open directory for CLONE_INTO_CGROUP.
func testCgroup(t *testing.T) (string, *os.File) {
	testenv.RequireRoot(t, "BPF programs are attached to a cgroup")
	root, err := Root()
	if err != nil {
		testenv.Skip(t, "no cgroup2: "+err.Error())
	}
	dir := filepath.Join(root, fmt.Sprintf("flyd-connectmap-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		for range 50 { // the helper's exit is seen a moment later
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s left", dir)
	})
	return dir, f
}

func open(t *testing.T, cg string) *Map {
	m, err := Open(Config{Cgroup: cg})
	if err != nil {
		testenv.Skip(t, "BPF cannot be used here: "+err.Error())
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func listen(t *testing.T, name string) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serve(ln, name)
	return netip.MustParseAddrPort(ln.Addr().String())
}

// freePort is a port of loopback that nothing listens on.
func freePort(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	return ap
}

func run(t *testing.T, cg *os.File, arg string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), "CONNECTMAP_HELPER=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %q: %v: %s", arg, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestRewriteAtConnect(t *testing.T) {
	dir, cg := testCgroup(t)
	m := open(t, dir)
	dialled := freePort(t)
	a, b := listen(t, "a"), listen(t, "b")
	set := func(ports ...netip.AddrPort) {
		t.Helper()
		tg := Target{Addr: ports[0].Addr()}
		for _, p := range ports {
			tg.Ports = append(tg.Ports, p.Port())
		}
		if err := m.Set(map[netip.AddrPort]Target{dialled: tg}); err != nil {
			t.Fatal(err)
		}
	}
	set(a)
	got, err := m.Entries()
	if err != nil || len(got) != 1 || got[dialled].Addr != a.Addr() || len(got[dialled].Ports) != 1 || got[dialled].Ports[0] != a.Port() {
		t.Fatalf("map holds %v (%v), want %v → %v", got, err, dialled, a)
	}
	if at, err := Attached(dir); err != nil || len(at) != 1 || at[0].Entries[dialled].Addr != a.Addr() || at[0].Program != m.Programs()[0] {
		t.Fatalf("attached at %s: %+v (%v), want the map's program with %v", dir, at, err, dialled)
	}

	// Rewritten once at connect: the server answers, and the socket names
	// the address dialled as its peer.
	if out, want := run(t, cg, "tcp "+dialled.String()), "peer "+dialled.String()+" said a"; out != want {
		t.Errorf("through the map: %q, want %q", out, want)
	}
	// The same process outside the cgroup is not rewritten (the program
	// sees the test's cgroup alone): this test's own dial is refused.
	if c, err := net.DialTimeout("tcp", dialled.String(), time.Second); err == nil {
		c.Close()
		t.Errorf("a dial outside the cgroup reached %v", dialled)
	}
	// A socket bound to an address first keeps its way: nftables'.
	if out := run(t, cg, "bound "+dialled.String()); !strings.Contains(out, "refused") {
		t.Errorf("a bound socket: %q, want it refused (not rewritten)", out)
	}
	// UDP is not rewritten.
	if out, want := run(t, cg, "udp "+dialled.String()), "peer "+dialled.String(); out != want {
		t.Errorf("udp: %q, want %q", out, want)
	}
	// Another network namespace's loopback is its own.
	if out, want := run(t, cg, "netns "+dialled.String()), "peer "+dialled.String()+" said own"; out != want {
		t.Errorf("another namespace: %q, want %q", out, want)
	}

	// A group: each connection goes to the next of the ports in turn.
	set(a, b)
	var seen []string
	for range 5 {
		out := run(t, cg, "tcp "+dialled.String())
		seen = append(seen, out[strings.LastIndex(out, " ")+1:])
	}
	if got := strings.Join(seen, " "); got != "a b a b a" {
		t.Errorf("a group of two answered %q, want a b a b a", got)
	}

	// Withdrawn: the next connect goes where it was dialled.
	if err := m.Set(nil); err != nil {
		t.Fatal(err)
	}
	if out := run(t, cg, "tcp "+dialled.String()); !strings.Contains(out, "refused") {
		t.Errorf("after the entry went: %q, want refused", out)
	}
}

func TestSetRefusesBadTargets(t *testing.T) {
	m := &Map{have: map[netip.AddrPort]Target{}}
	k := netip.MustParseAddrPort("127.0.0.1:8080")
	in := netip.MustParseAddr("10.213.0.2")
	for name, tg := range map[string]Target{
		"no port":   {Addr: in},
		"too many":  {Addr: in, Ports: make([]uint16, MaxPorts+1)},
		"ipv6":      {Addr: netip.MustParseAddr("::1"), Ports: []uint16{80}},
		"no target": {Ports: []uint16{80}},
	} {
		if err := m.Set(map[netip.AddrPort]Target{k: tg}); err == nil || !strings.Contains(err.Error(), "connectmap") {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// TestDetachedWithTheProcess: the links are the process's; closed, no
// program of the map's is left at the cgroup.
func TestDetachedOnClose(t *testing.T) {
	dir, _ := testCgroup(t)
	m := open(t, dir)
	ids := m.Programs()
	if len(ids) != 2 {
		t.Fatalf("programs %v, want 2", ids)
	}
	if got := attached(t, dir); !contains(got, ids) {
		t.Fatalf("attached at %s: %v, want %v among them", dir, got, ids)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attached(t, dir); len(got) != 0 {
		t.Errorf("after Close, attached at %s: %v", dir, got)
	}
}

// attached lists the programs attached at a cgroup's connect4 and
// getpeername4 hooks.
func attached(t *testing.T, dir string) []ebpf.ProgramID {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ebpf.ProgramID
	for _, at := range []ebpf.AttachType{ebpf.AttachCGroupInet4Connect, ebpf.AttachCgroupInet4GetPeername} {
		r, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: at})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Programs {
			out = append(out, p.ID)
		}
	}
	return out
}

func contains(have, want []ebpf.ProgramID) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestClosedMapRefuses: a plane that writes after the daemon closed the
// map is told so, and nothing panics.
func TestClosedMapRefuses(t *testing.T) {
	dir, _ := testCgroup(t)
	m := open(t, dir)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	k := netip.MustParseAddrPort("127.0.0.1:8080")
	if err := m.Set(map[netip.AddrPort]Target{k: {Addr: netip.MustParseAddr("10.213.0.2"), Ports: []uint16{80}}}); err == nil {
		t.Error("Set on a closed map succeeded")
	}
	if _, err := m.Entries(); err == nil {
		t.Error("Entries of a closed map succeeded")
	}
}
