package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// LinkPrefix starts the host-side name of every network link: fly-N for
// the N-th /30 of the pool.
const LinkPrefix = "fly-"

// maxLinks bounds the links of one host: more than any pool flyd is
// given, and what an interface name of 15 bytes holds.
const maxLinks = 1 << 16

// Link is an isolated network's connection to the host: a veth pair whose
// host end (Name) holds Host and whose end inside, eth0, holds Inner, on
// one /30 of the pool, with the default route inside going through Host.
type Link struct {
	Name        string
	Subnet      netip.Prefix
	Host, Inner netip.Addr
}

// CheckPool refuses a pool that is not an IPv4 prefix of /29 or wider, or
// that overlaps a route of the host other than flyd's own links: the
// networks' addresses would shadow real ones.
func CheckPool(pool netip.Prefix) error {
	if !pool.IsValid() || !pool.Addr().Is4() || pool.Bits() > 29 {
		return fmt.Errorf("%w: network pool %v: an IPv4 prefix of /29 or wider is needed", errdefs.ErrInvalid, pool)
	}
	// Every table: the local one holds the host's own addresses and
	// loopback's 127.0.0.0/8.
	others, err := retried(netlink.LinkList)
	if err != nil {
		return fmt.Errorf("list the host's links: %w", err)
	}
	mine := map[int]bool{}
	for _, l := range others {
		mine[l.Attrs().Index] = strings.HasPrefix(l.Attrs().Name, LinkPrefix)
	}
	routes, err := retried(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("list the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			continue // a default route overlaps everything, and shadows nothing
		}
		if isMine, known := mine[r.LinkIndex]; isMine || (!known && r.LinkIndex != 0) {
			continue // flyd's own link, or one that was just deleted
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP.To4())
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		if p := netip.PrefixFrom(dst, ones); p.Overlaps(pool) {
			return fmt.Errorf("%w: network pool %v overlaps the host's route to %v: choose another with --network-pool", errdefs.ErrInvalid, pool, p)
		}
	}
	return nil
}

// Connect gives nw its link to the host, made from pool, unless it has
// one. The first free /30 is taken by creating its link, whose name is
// unique on the host: two daemons can never take the same one. Whether
// it has one is asked inside its namespace (linkIn), never by listing
// the host's links, which grow with every network of every daemon.
func (n *Networks) Connect(nw *Network, pool netip.Prefix) (*Link, error) {
	unlock, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ns, err := netns.GetFromPath(nw.Path)
	if err != nil {
		return nil, fmt.Errorf("open network %q: %w", nw.Name, err)
	}
	defer ns.Close()
	h, err := openHandles(nw, ns)
	if err != nil {
		return nil, err
	}
	defer h.close()
	l, host, err := h.linkIn(nw)
	if err != nil {
		return nil, fmt.Errorf("connect network %q: %w", nw.Name, err)
	}
	if l != nil && l.Subnet.IsValid() {
		return l, nil
	}
	if host != nil {
		// Half made by a daemon that died in the middle: made again.
		if err := h.host.LinkDel(host); err != nil {
			return nil, fmt.Errorf("connect network %q: delete its half-made link %s: %w", nw.Name, l.Name, err)
		}
	}
	// From where the last search ended, then from the pool's start: the
	// /30s below n.next were taken when this process last looked, and
	// each one taken costs a link creation the kernel refuses (EEXIST).
	start := 0
	if pool == n.nextPool {
		start = n.next
	}
	for _, span := range [][2]int{{start, maxLinks}, {0, start}} {
		for i := span[0]; i < span[1]; i++ {
			l, ok := linkAt(pool, i)
			if !ok {
				break
			}
			err := h.makeLink(l, nw, ns)
			if errors.Is(err, unix.EEXIST) {
				continue // another network's, maybe another daemon's
			}
			if err != nil {
				return nil, fmt.Errorf("connect network %q: %w", nw.Name, err)
			}
			n.next, n.nextPool = i+1, pool
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: network pool %v has no free /30 left for network %q", errdefs.ErrUnavailable, pool, nw.Name)
}

// linkAt is the i-th /30 of pool.
func linkAt(pool netip.Prefix, i int) (*Link, bool) {
	base := pool.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(4 * i)
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	sub := netip.PrefixFrom(a, 30)
	if !pool.Contains(a) || !pool.Contains(sub.Addr().Next().Next().Next()) {
		return nil, false
	}
	return &Link{Name: LinkPrefix + strconv.Itoa(i), Subnet: sub, Host: a.Next(), Inner: a.Next().Next()}, true
}

// linkMTU is both ends' MTU: the largest a veth takes, loopback's size
// but one byte. The traffic that crosses a link stays on this host (the
// host's 127.0.0.1 to a published port, the host to a network's address,
// one network to another's published port through the host), and in
// segments of loopback's size it moves nearly as fast as loopback does:
// with 1,500 bytes, TCP's segments were a 45th of loopback's, and a
// published port's echo ran at 0.70–0.78x loopback's; with this, at
// 0.91–0.99x (BENCHMARKS.md).
const linkMTU = 65535

// wayOutMTU is the MTU of a network's default route, what leaves through
// the host for other machines: the Ethernet size the link had before, so
// that TCP to the outside is offered segments a real wire carries and
// UDP is cut into fragments in the network as it always was. Only the
// link's own /30 (the host's end, the address every path through the
// host takes) gets linkMTU.
const wayOutMTU = 1500

// makeLink creates the veth pair, its end inside named eth0, addresses
// both ends and routes the network's traffic through the host. What it
// made is deleted when a step fails.
func (h *handles) makeLink(l *Link, nw *Network, ns netns.NsHandle) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.Name, MTU: linkMTU},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(ns),
		PeerMTU:       linkMTU,
	}
	err := h.host.LinkAdd(veth)
	if errors.Is(err, unix.EINVAL) {
		// A kernel whose veth takes no such MTU: the Ethernet default,
		// slower and the same otherwise.
		veth.MTU, veth.PeerMTU = 0, 0
		err = h.host.LinkAdd(veth)
	}
	if err != nil {
		return err
	}
	// LinkAdd learnt the host end's index: veth is that end from here on.
	if err := h.setUpLink(l, nw, veth); err != nil {
		_ = h.host.LinkDel(veth)
		return err
	}
	return nil
}

func (h *handles) setUpLink(l *Link, nw *Network, host netlink.Link) error {
	// The alias says whose link it is: the namespace file's path is unique
	// to one network of one daemon.
	if err := h.host.LinkSetAlias(host, nw.Path); err != nil {
		return fmt.Errorf("name link %s: %w", l.Name, err)
	}
	if err := h.host.AddrAdd(host, addr(l.Host)); err != nil {
		return fmt.Errorf("address link %s: %w", l.Name, err)
	}
	// Loopback addresses may cross the link once translated: the host's
	// 127.0.0.1 reaching a published port, and, inside, what arrives for
	// the network's address handed to a program that serves 127.0.0.1.
	// The link is IPv4 alone: without IPv6 at either end, neither has a
	// link-local address to reach the other by (the host's services on
	// [::] included), before the link is up and ever after.
	if err := errors.Join(routeLocalnet(l.Name), noIPv6(l.Name)); err != nil {
		return err
	}
	if err := h.host.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring up link %s: %w", l.Name, err)
	}
	inner, err := h.in.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("find eth0 in network %q: %w", nw.Name, err)
	}
	if err := h.in.AddrAdd(inner, addr(l.Inner)); err != nil {
		return fmt.Errorf("address eth0 in network %q: %w", nw.Name, err)
	}
	if err := nw.Do(func() error { return errors.Join(routeLocalnet("eth0"), noIPv6("eth0")) }); err != nil {
		return err
	}
	if err := h.in.LinkSetUp(inner); err != nil {
		return fmt.Errorf("bring up eth0 in network %q: %w", nw.Name, err)
	}
	gw := net.IP(l.Host.AsSlice())
	if err := h.in.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Gw: gw, MTU: wayOutMTU}); err != nil {
		return fmt.Errorf("default route in network %q: %w", nw.Name, err)
	}
	return nil
}

// routeLocalnet sets route_localnet on a link of the calling thread's
// namespace (/proc/sys/net is the opener's namespace's).
func routeLocalnet(link string) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+link+"/route_localnet", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("route_localnet on %s: %w", link, err)
	}
	return nil
}

// noIPv6 turns IPv6 off on a link of the calling thread's namespace. A
// kernel without IPv6 (ipv6.disable=1) has nothing to turn off.
func noIPv6(link string) error {
	err := os.WriteFile("/proc/sys/net/ipv6/conf/"+link+"/disable_ipv6", []byte("1\n"), 0o644)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disable_ipv6 on %s: %w", link, err)
	}
	return nil
}

func addr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(30, 32)}}
}

// Link returns nw's link, or nil when it has none (a network that does
// not exist has none). It asks inside the namespace (linkIn): however
// many links the host has, that is three questions.
func (n *Networks) Link(nw *Network) (*Link, error) {
	l, _, err := linkInside(nw)
	return l, err
}

// linkInside is linkIn on a handle of its own, for a network whose
// namespace may not exist (then it has no link).
func linkInside(nw *Network) (*Link, netlink.Link, error) {
	if ok, err := isNamespace(nw.Path); err != nil || !ok {
		return nil, nil, err
	}
	h, err := openNetwork(nw)
	if err != nil {
		return nil, nil, err
	}
	defer h.close()
	return h.linkIn(nw)
}

// linkIn finds nw's link from inside: eth0 in its namespace is the end
// of a veth pair whose other end, on the host, it names by index; that
// end is nw's when its alias is nw's path (a retired link's is not, and
// an index the host reused is another link's). It returns the link and
// its host end, nil for none; a link with no address (half made) has a
// Name alone.
func (h *handles) linkIn(nw *Network) (*Link, netlink.Link, error) {
	inner, err := h.in.LinkByName("eth0")
	if notFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("find eth0: %w", err)
	}
	peer := inner.Attrs().ParentIndex
	if peer == 0 {
		return nil, nil, nil // no veth's end
	}
	host, err := h.host.LinkByIndex(peer)
	if notFound(err) {
		return nil, nil, nil // the kernel is deleting the pair
	}
	if err != nil {
		return nil, nil, fmt.Errorf("find eth0's peer: %w", err)
	}
	if a := host.Attrs(); a.Alias != nw.Path || !strings.HasPrefix(a.Name, LinkPrefix) {
		return nil, nil, nil
	}
	l := &Link{Name: host.Attrs().Name}
	addrs, err := h.in.AddrList(inner, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return l, host, nil
	}
	in, ok := netip.AddrFromSlice(addrs[0].IP.To4())
	if !ok {
		return l, host, nil
	}
	l.Subnet, l.Host, l.Inner = netip.PrefixFrom(in, 30).Masked(), in.Prev(), in
	return l, host, nil
}

// hostEnd is the end on the host of nw's link, nil when it has none:
// the one told, asked for through hh by name, while it is still nw's;
// else found from inside the namespace.
func hostEnd(hh *netlink.Handle, nw *Network, told *Link) (netlink.Link, error) {
	if told != nil {
		host, err := hh.LinkByName(told.Name)
		if err == nil && host.Attrs().Alias == nw.Path {
			return host, nil
		}
		if err != nil && !notFound(err) {
			return nil, err
		}
	}
	_, host, err := linkInside(nw)
	return host, err
}

// handles are netlink sockets of the route family on both sides of a
// network's link, the host's (the caller's namespace) and the network's,
// for all of one change: the package's functions open a socket for each
// call, and a handle of every family a socket of each (three times the
// cost of one, a thread's trip into the namespace for each).
type handles struct{ host, in *netlink.Handle }

func openHandles(nw *Network, ns netns.NsHandle) (*handles, error) {
	in, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in network %q: %w", nw.Name, err)
	}
	host, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &handles{host: host, in: in}, nil
}

// openNetwork is openHandles for nw's namespace by its path.
func openNetwork(nw *Network) (*handles, error) {
	ns, err := netns.GetFromPath(nw.Path)
	if err != nil {
		return nil, fmt.Errorf("open network %q: %w", nw.Name, err)
	}
	defer ns.Close()
	return openHandles(nw, ns)
}

func (h *handles) close() { h.host.Close(); h.in.Close() }

func notFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// Links returns the links of this directory's networks, by network name.
func (n *Networks) Links() (map[string]*Link, error) {
	return n.links(func(string) bool { return true })
}

// links are the links of this directory's networks whose names want
// takes, by network name.
func (n *Networks) links(want func(name string) bool) (map[string]*Link, error) {
	all, err := retried(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	out := map[string]*Link{}
	prefix := n.dir + "/"
	for _, hl := range all {
		a := hl.Attrs()
		name, ok := strings.CutPrefix(a.Alias, prefix)
		if !strings.HasPrefix(a.Name, LinkPrefix) || !ok || !want(name) {
			continue
		}
		if strings.HasSuffix(name, retiredSuffix) {
			out[name] = &Link{Name: a.Name} // being deleted: SweepLinks's alone
			continue
		}
		addrs, err := retried(func() ([]netlink.Addr, error) { return netlink.AddrList(hl, netlink.FAMILY_V4) })
		if err != nil || len(addrs) == 0 {
			out[name] = &Link{Name: a.Name} // half made: still ours to delete
			continue
		}
		host, _ := netip.AddrFromSlice(addrs[0].IP.To4())
		sub := netip.PrefixFrom(host, 30).Masked()
		out[name] = &Link{Name: a.Name, Subnet: sub, Host: host, Inner: host.Next()}
	}
	return out, nil
}

// retiredSuffix ends the alias of a link whose network was deleted and
// whose own deletion the kernel is finishing: no network's any more, but
// still this directory's, so that a daemon that dies meanwhile sweeps it.
const retiredSuffix = "#deleted"

// retire takes a deleted network's link out of use at once: its alias no
// longer names the network and it is down, so nothing crosses it, and a
// network made again under the name gets a link of its own. The link is
// then deleted in the background: deleting a veth pair waits for the
// kernel to retire both devices (an RCU grace period, some 20 ms), which
// no caller needs to wait for. Wait does.
func (n *Networks) retire(hh *netlink.Handle, host netlink.Link, nw *Network) error {
	if err := hh.LinkSetAlias(host, nw.Path+retiredSuffix); err != nil {
		return err
	}
	if err := hh.LinkSetDown(host); err != nil {
		return err
	}
	// Its /30 is free once the kernel has deleted it: the next search
	// starts there.
	if i, err := strconv.Atoi(strings.TrimPrefix(host.Attrs().Name, LinkPrefix)); err == nil && i < n.next {
		n.next = i
	}
	n.retiring.Go(func() {
		if err := deleteLink(host); err != nil {
			n.retireMu.Lock()
			n.retireErr = errors.Join(n.retireErr, fmt.Errorf("delete link %s: %w", host.Attrs().Name, err))
			n.retireMu.Unlock()
		}
	})
	return nil
}

// Wait waits until the links of deleted networks are gone, and says which
// the kernel refused to delete (SweepLinks tries them again).
func (n *Networks) Wait() error {
	n.retiring.Wait()
	n.retireMu.Lock()
	defer n.retireMu.Unlock()
	err := n.retireErr
	n.retireErr = nil
	return err
}

// disconnect deletes a network's link; the end inside goes with it.
func disconnect(l *Link) error {
	host, err := hostLink(l)
	if err != nil || host == nil {
		return err
	}
	return deleteLink(host)
}

// deleteLink deletes a veth pair by its host end. One that went meanwhile
// is no error: the kernel deletes the pair with its namespace, once the
// namespace's last holder is gone, and may do so first.
func deleteLink(host netlink.Link) error {
	err := netlink.LinkDel(host)
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// hostLink is l's end on the host, nil when it is gone already.
func hostLink(l *Link) (netlink.Link, error) {
	host, err := netlink.LinkByName(l.Name)
	if notFound(err) {
		return nil, nil
	}
	return host, err
}

// retried runs a netlink dump again while the kernel says it was
// interrupted: links come and go while other networks are made (by this
// daemon or another), and a dump that saw them change is inconsistent.
func retried[T any](dump func() ([]T, error)) ([]T, error) {
	for range 20 {
		out, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return dump()
}
