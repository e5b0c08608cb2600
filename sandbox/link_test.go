package sandbox

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/flyd-dev/flyd/internal/testenv"
)

// testPool is a pool no test host routes: documentation addresses.
var testPool = netip.MustParsePrefix("198.18.128.0/20")

// TestConnectAndDelete: a network's link gets the first free /30, its end
// inside holds the address and the default route, two networks never
// share a /30, and deleting a network deletes its link.
func TestConnectAndDelete(t *testing.T) {
	testenv.RequireRoot(t, "links are made on the host")
	n, err := NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Prefix]bool{}
	var links []*Link
	for _, name := range []string{"lk-a", "lk-b"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := n.Connect(nw, testPool)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Delete(name) })
		if seen[l.Subnet] || !testPool.Contains(l.Inner) || l.Host.Next() != l.Inner {
			t.Fatalf("link %+v", l)
		}
		seen[l.Subnet] = true
		checkMTUs(t, nw, l)
		again, err := n.Connect(nw, testPool)
		if err != nil || *again != *l {
			t.Fatalf("connecting again: %+v %v, want %+v", again, err, l)
		}
		links = append(links, l)
	}
	if err := n.Delete("lk-a"); err != nil {
		t.Fatal(err)
	}
	// Out of use at once: no network's, and down; gone once the kernel
	// is done with it.
	if l, err := netlink.LinkByName(links[0].Name); err == nil && (l.Attrs().Flags&net.FlagUp != 0 || l.Attrs().Alias == filepath.Join(n.Dir(), "lk-a")) {
		t.Errorf("link %s of a deleted network is up, or still its network's: %+v", links[0].Name, l.Attrs())
	}
	if nw, err := n.Ensure("lk-a"); err != nil {
		t.Fatal(err)
	} else if l, err := n.Link(nw); err != nil || l != nil {
		t.Errorf("network lk-a made again has a link before it is connected: %+v %v", l, err)
	}
	if err := n.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(links[0].Name); err == nil {
		t.Errorf("link %s outlived its network", links[0].Name)
	}
	if _, err := netlink.LinkByName(links[1].Name); err != nil {
		t.Errorf("link %s of the other network went too: %v", links[1].Name, err)
	}
}

// TestCheckPool refuses a pool the host already routes.
func TestCheckPool(t *testing.T) {
	if err := CheckPool(netip.MustParsePrefix("127.0.0.0/16")); err == nil {
		t.Error("a pool overlapping loopback's route was accepted")
	}
	if err := CheckPool(netip.MustParsePrefix("198.18.128.0/30")); err == nil {
		t.Error("a pool of one /30 was accepted")
	}
	if err := CheckPool(testPool); err != nil {
		t.Errorf("the test pool: %v", err)
	}
}

// checkMTUs: both ends of a link take loopback's size, and the way out,
// the default route inside, an Ethernet's.
func checkMTUs(t *testing.T, nw *Network, l *Link) {
	t.Helper()
	host, err := netlink.LinkByName(l.Name)
	if err != nil {
		t.Fatal(err)
	}
	if mtu := host.Attrs().MTU; mtu != linkMTU {
		t.Errorf("link %s: MTU %d, want %d", l.Name, mtu, linkMTU)
	}
	ns, err := netns.GetFromPath(nw.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	inner, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if mtu := inner.Attrs().MTU; mtu != linkMTU {
		t.Errorf("eth0 of network %s: MTU %d, want %d", nw.Name, mtu, linkMTU)
	}
	// IPv4 alone: IPv6 off at both ends, and no address of it there,
	// link-local included.
	hostOff, _ := os.ReadFile("/proc/sys/net/ipv6/conf/" + l.Name + "/disable_ipv6")
	var innerOff []byte
	if err := nw.Do(func() (err error) {
		innerOff, err = os.ReadFile("/proc/sys/net/ipv6/conf/eth0/disable_ipv6")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hostV6, _ := netlink.AddrList(host, netlink.FAMILY_V6)
	innerV6, _ := h.AddrList(inner, netlink.FAMILY_V6)
	if string(hostOff) != "1\n" || string(innerOff) != "1\n" || len(hostV6)+len(innerV6) > 0 {
		t.Errorf("IPv6 on network %s's link: disable_ipv6 %q at the host end, %q on eth0; addresses %v, %v",
			nw.Name, hostOff, innerOff, hostV6, innerV6)
	}
	routes, err := h.RouteList(inner, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var def *netlink.Route
	for i, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			def = &routes[i]
		}
	}
	if def == nil || def.MTU != wayOutMTU || def.Gw.String() != l.Host.String() {
		t.Errorf("default route of network %s: %+v, want through %v with MTU %d", nw.Name, def, l.Host, wayOutMTU)
	}
}

// TestDeleteLinkedToldWrong: a caller that tells Delete a link that is
// not the network's (another network's, or one it no longer has) deletes
// the network's own all the same, found inside it, and leaves the other.
func TestDeleteLinkedToldWrong(t *testing.T) {
	testenv.RequireRoot(t, "links are made on the host")
	n, err := NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]*Link{}
	for _, name := range []string{"lk-told", "lk-other"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Delete(name); _ = n.Wait() })
		if links[name], err = n.Connect(nw, testPool); err != nil {
			t.Fatal(err)
		}
	}
	for _, told := range []*Link{links["lk-other"], {Name: LinkPrefix + "gone"}} {
		if err := n.DeleteLinked("lk-told", told); err != nil {
			t.Fatal(err)
		}
		if err := n.Wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := netlink.LinkByName(links["lk-told"].Name); err == nil {
			t.Errorf("told %s: link %s outlived its network", told.Name, links["lk-told"].Name)
		}
		other, err := netlink.LinkByName(links["lk-other"].Name)
		if err != nil || other.Attrs().Flags&net.FlagUp == 0 || other.Attrs().Alias != filepath.Join(n.Dir(), "lk-other") {
			t.Fatalf("told %s: the other network's link %s was touched: %v", told.Name, links["lk-other"].Name, err)
		}
		nw, err := n.Ensure("lk-told")
		if err != nil {
			t.Fatal(err)
		}
		if links["lk-told"], err = n.Connect(nw, testPool); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConnectRemakesHalfMade: a link a daemon left half made (the pair,
// no address) is made again by the next Connect, and a link found from
// inside is the one Connect made.
func TestConnectRemakesHalfMade(t *testing.T) {
	testenv.RequireRoot(t, "links are made on the host")
	n, err := NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nw, err := n.Ensure("lk-half")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Delete("lk-half"); _ = n.Wait() })
	ns, err := netns.GetFromPath(nw.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	half := LinkPrefix + "half"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: half}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	if err := netlink.LinkSetAlias(veth, nw.Path); err != nil {
		t.Fatal(err)
	}
	if l, err := n.Link(nw); err != nil || l == nil || l.Name != half || l.Subnet.IsValid() {
		t.Fatalf("a half-made link found as %+v (%v), want %s with no subnet", l, err, half)
	}
	l, err := n.Connect(nw, testPool)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name == half || !l.Subnet.IsValid() {
		t.Fatalf("connected over a half-made link: %+v", l)
	}
	if found, err := n.Link(nw); err != nil || found == nil || *found != *l {
		t.Fatalf("link found from inside: %+v (%v), want %+v", found, err, l)
	}
	if _, err := netlink.LinkByName(half); err == nil {
		t.Errorf("the half-made link %s is still there", half)
	}
}

// TestConnectReusesAFreedSubnet: a network made after another's deletion,
// once its link is gone, gets the /30 that deletion freed, though the
// search for a free one starts after the last one taken.
func TestConnectReusesAFreedSubnet(t *testing.T) {
	testenv.RequireRoot(t, "links are made on the host")
	n, err := NewNetworks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]*Link{}
	for _, name := range []string{"lk-1", "lk-2", "lk-3"} {
		nw, err := n.Ensure(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Delete(name); _ = n.Wait() })
		if links[name], err = n.Connect(nw, testPool); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.DeleteLinked("lk-2", links["lk-2"]); err != nil {
		t.Fatal(err)
	}
	if err := n.Wait(); err != nil {
		t.Fatal(err)
	}
	nw, err := n.Ensure("lk-4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Delete("lk-4"); _ = n.Wait() })
	l, err := n.Connect(nw, testPool)
	if err != nil {
		t.Fatal(err)
	}
	if l.Subnet != links["lk-2"].Subnet {
		t.Errorf("network made after lk-2's deletion got %v, want lk-2's %v", l.Subnet, links["lk-2"].Subnet)
	}
}
