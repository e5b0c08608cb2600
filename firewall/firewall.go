// Package firewall keeps a daemon's nftables tables: the rules that let an
// isolated network's traffic out through the host (source NAT) or keep it
// in, that keep networks from reaching each other, and that forward a
// network's published ports (balanced over a group's replicas); the guards
// the policies and the endpoints' visibilities ask (SetProjection); and
// declared reach, a table in each namespace under it that admits to an
// endpoint only the cgroups allowed it, and counts what it refuses
// (SetReach, Refusals). Each daemon owns one table in the ip family (named
// by internal/instance), and its namesake in the ip6 family that walls
// networks' links off IPv6, whole, and rewrites them in one transaction
// whenever a network changes; it never touches a rule it did not create,
// nor another daemon's table. Connections already flowing keep their NAT
// bindings across a rewrite (they live in conntrack, not in the table), so
// a daemon restart drops none of them.
//
// It talks to the kernel through netlink (github.com/google/nftables): no
// `nft` binary is needed. It does not make links or addresses (package
// sandbox does), and decides nothing: what the rules say is given it by
// the network plane (netplane), which projects them from the documents.
package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/errdefs"
)

// LinkPrefix starts the host-side name of every network link: the rules
// that keep networks apart match on it.
const LinkPrefix = "fly-"

// Net is one isolated network as the firewall sees it.
type Net struct {
	Link   string       // the host end of its veth
	Subnet netip.Prefix // its addresses
	Inner  netip.Addr   // its own address, on eth0 inside
	// Egress lets the network reach beyond itself through the host, with
	// source NAT; without it the host and the outside are unreachable.
	Egress bool
	// Published are its ports reached on the host's own addresses
	// (loopback, the advertised one) at a host port.
	Published []Forward
	// Served are the ports of its endpoints: what reaches Inner at one of
	// them inside is handed to 127.0.0.1, so that a program that binds
	// loopback only (most development servers) is reached all the same.
	Served []int
	// Groups are the ports of its groups of replicas: a connection to
	// one, at Inner from outside or at any of its own addresses from
	// inside, goes to 127.0.0.1 at the next of its Balance ports.
	Groups []Forward
	// NS is its namespace file, where the rules for Served and Groups are
	// written.
	NS string
}

// Forward takes TCP connections to a host port to a port of a network:
// at every address of the host when Exposed, else at loopback and from
// the host's networks only (an internal endpoint's, never at an address
// beyond the host). With Balance, each new connection goes to the next
// of its ports in turn instead (a group of replicas, each on its own).
type Forward struct {
	HostPort, Port int
	Balance        []int
	Exposed        bool
}

// Firewall is the table's desired contents. It is safe for concurrent use.
type Firewall struct {
	table string
	// mu guards the fields below, and is held while the kernel's tables
	// are written, so that what is written is what they hold; nothing of
	// the caller's is called under it.
	mu   sync.Mutex
	nets map[string]Net
	// inside is what each network's own table was last written with.
	inside map[string]insideRules
	// proj is what the policies and visibilities ask (guard.go).
	proj Projection
	// reach is each namespace's reach table as written (declared.go), by
	// namespace file ("" the host's); nil for one known to have none.
	reach map[string]*reachState
}

// New checks that the kernel offers nf_tables to flyd and returns an
// empty firewall for table; nothing is written until Set or Sync.
func New(table string) (*Firewall, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, unavailable(err)
	}
	defer c.CloseLasting()
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		return nil, unavailable(err)
	}
	return &Firewall{table: table, nets: map[string]Net{}, inside: map[string]insideRules{}}, nil
}

func unavailable(err error) error {
	return fmt.Errorf("%w: nf_tables (Linux 3.13, CONFIG_NF_TABLES) does not answer: %v", errdefs.ErrUnavailable, err)
}

// Set adds or changes a network and rewrites the table.
func (f *Firewall) Set(name string, n Net) error {
	if !strings.HasPrefix(n.Link, LinkPrefix) || !n.Subnet.IsValid() || !n.Subnet.Addr().Is4() {
		return fmt.Errorf("%w: network %s: link %q, subnet %v", errdefs.ErrInvalid, name, n.Link, n.Subnet)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nets[name] = n
	if err := f.write(); err != nil {
		return err
	}
	return f.writeInside(name, n)
}

// Remove forgets a network and rewrites the table.
func (f *Firewall) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nets[name]; !ok {
		return nil
	}
	delete(f.nets, name)
	delete(f.inside, name)
	return f.write()
}

// Sync rewrites the table with nets alone: what a starting daemon does
// once it knows its networks, replacing whatever a crash left.
func (f *Firewall) Sync(nets map[string]Net) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nets = map[string]Net{}
	for name, n := range nets {
		f.nets[name] = n
	}
	if err := f.write(); err != nil {
		return err
	}
	var errs []error
	for name, n := range nets {
		errs = append(errs, f.writeInside(name, n))
	}
	return errors.Join(errs...)
}

// insideRules is what a network's own table is written from.
type insideRules struct {
	served []int
	groups []Forward
}

func (r insideRules) equal(o insideRules) bool {
	return slices.Equal(r.served, o.served) && slices.EqualFunc(r.groups, o.groups, func(a, b Forward) bool {
		return a.HostPort == b.HostPort && a.Port == b.Port && slices.Equal(a.Balance, b.Balance)
	})
}

// writeInside writes the network's own table, in its namespace, when what
// it serves changed: traffic to its address at a served port goes to
// 127.0.0.1, and to a group's port to one of the group's. The table dies
// with the namespace.
func (f *Firewall) writeInside(name string, n Net) error {
	want := insideRules{served: slices.Clone(n.Served), groups: slices.Clone(n.Groups)}
	if had, ok := f.inside[name]; n.NS == "" || ok && had.equal(want) || !ok && len(n.Served)+len(n.Groups) == 0 {
		return nil
	}
	fd, err := unix.Open(n.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	defer unix.Close(fd)
	c, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		return unavailable(err)
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: "flyd", Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	if len(n.Served)+len(n.Groups) > 0 {
		if err := buildInside(c, c.AddTable(t), n); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write the rules inside network %s: %w", name, err)
	}
	f.inside[name] = want
	return nil
}

// Table is the name of the firewall's table.
func (f *Firewall) Table() string { return f.table }

// Purge deletes a table of flyd's, both families, and its reach table.
func Purge(table string) error {
	c, err := nftables.New()
	if err != nil {
		return unavailable(err)
	}
	defer c.CloseLasting()
	for _, t := range []*nftables.Table{{Name: table, Family: nftables.TableFamilyIPv4},
		{Name: table, Family: nftables.TableFamilyIPv6}, {Name: table + "-reach", Family: nftables.TableFamilyINet}} {
		c.AddTable(t) // so that the delete cannot fail for a missing table
		c.DelTable(t)
	}
	return c.Flush()
}

// write replaces the table in one transaction: the kernel applies all of
// it or none, so no packet ever sees half a table.
func (f *Firewall) write() error { return f.writeWith(f.nets, f.proj) }

// writeWith writes the table of nets and a projection.
func (f *Firewall) writeWith(nets map[string]Net, p Projection) error {
	c, err := nftables.New(nftables.WithSockOptions(roomyWrites))
	if err != nil {
		return unavailable(err)
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: f.table, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	if len(nets) > 0 || len(p.Guards) > 0 || len(p.Reach) > 0 {
		tt := c.AddTable(t)
		links, err := ownLinks(c, tt, nets)
		if err != nil {
			return err
		}
		if err := buildReach(c, tt, p.Reach, links); err != nil {
			return err
		}
		buildGuards(c, tt, p.Guards)
		if len(nets) > 0 {
			if err := build(c, tt, sorted(nets), links); err != nil {
				return err
			}
		}
	}
	// The networks are IPv4: the IPv6 a link would carry (link-local
	// addresses) is refused, and what the host serves on IPv6 is
	// guarded, in a table of the same name in the ip6 family, in the
	// same transaction.
	t6 := &nftables.Table{Name: f.table, Family: nftables.TableFamilyIPv6}
	c.AddTable(t6)
	c.DelTable(t6)
	if len(nets) > 0 || hostReach(p.Reach) {
		tt6 := c.AddTable(t6)
		if len(nets) > 0 {
			build6(c, tt6)
		}
		if hostReach(p.Reach) {
			if err := buildReach6(c, tt6, p.Reach); err != nil {
				return err
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write nftables table %s: %w", f.table, err)
	}
	return nil
}

func sorted(nets map[string]Net) []Net {
	names := make([]string, 0, len(nets))
	for n := range nets {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Net, len(names))
	for i, n := range names {
		out[i] = nets[n]
	}
	return out
}

// writeBuffer is how much one transaction may hold: the whole table goes
// in one sendmsg, and a thousand policy rules outgrow the socket's
// default (net.core.wmem_default, 208 KiB on most hosts).
const writeBuffer = 32 << 20

// roomyWrites sizes a netlink socket's buffers for the whole table, past
// net.core.wmem_max and rmem_max (flyd is root: SO_SNDBUFFORCE and
// SO_RCVBUFFORCE). The memory is taken only as messages need it.
func roomyWrites(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		// The kernel's answers (an acknowledgement a message) come back
		// as many: the receive side needs the room too.
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, writeBuffer),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, writeBuffer))
	}); err != nil {
		return err
	}
	return serr
}

// Forwarding turns on IPv4 forwarding, which a network's traffic through
// the host needs, and reports whether it was off.
func Forwarding() (changed bool, err error) {
	const path = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(string(b)) == "1" {
		return false, nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return false, fmt.Errorf("turn on IPv4 forwarding: %w", err)
	}
	return true, nil
}
