package firewall

// Declared reach: an endpoint under it admits only the processes of the
// workloads allowed it. The workloads of one namespace share its
// addresses, so a packet's address cannot tell them apart; the socket that
// sends it can. The kernel stamps every socket with the v2 cgroup of the
// process that made it, and nftables' `socket cgroupv2 level N` reads it,
// but only where the sending socket is still the packet's: in the output
// hook of the client's own namespace (at the input of a server, and across
// a veth, the packet has left its socket, and the lookup finds the
// server's). So each namespace gets a table of its own, `inet flyd-reach`
// (the host's is named after the daemon's table), whose output chain sees
// every connection a process of that namespace begins:
//
//	reach        (filter, output, before NAT): a TCP SYN from a socket of a
//	             workload of this daemon (its cgroup below the daemon's
//	             parent) goes to reach-check; anything else (the daemon's
//	             own probes, `flyd exec`, every process outside flyd's
//	             workloads, replies, packets of connections already made)
//	             passes.
//	reach-check  (regular): a SYN to a guarded destination passes when its
//	             socket's cgroup is allowed that destination; otherwise it
//	             is counted in a refused set and answered with a TCP reset,
//	             so the program sees "connection refused" at once.
//
// A guarded destination is a port reached through loopback (an endpoint
// of the namespace, or on the host a published port before its DNAT), or
// an address and port beyond it (the gateway of an isolated network, the
// address of another network's endpoint). Everything that changes is an
// element of a set: a grant added or removed is one small transaction,
// takes effect at the next connect and leaves connections already made
// alone. The refused sets are the kernel's record of every refusal, by
// cgroup and destination, with counters: the daemon reads them instead of
// taking a message per refused packet, and they outlive a daemon restart.

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// ReachTree is where the daemon's workloads are in the v2 cgroup tree:
// their parent's cgroup id and level. A socket whose cgroup is not below
// Parent is not a workload's, and is never refused.
type ReachTree struct {
	Parent uint64
	Level  int
}

// ReachTable is what one namespace's processes may connect to among the
// destinations under declared reach.
type ReachTable struct {
	// NS is the namespace's file; "" is the host's own namespace.
	NS     string
	Local  []LocalDest
	Remote []RemoteDest
	// Gateways, of the host's table, are the networks' links and the
	// host's address on each: a network reaches a Local destination of
	// the host's only at its gateway, where its own table guards it.
	Gateways []Gateway
}

// Gateway is a network's link and the host's address on it.
type Gateway struct {
	Link string
	Addr netip.Addr
}

// LocalDest is a port reached through the namespace's loopback, and the
// cgroups allowed it.
type LocalDest struct {
	Port    int
	Allowed []uint64
}

// RemoteDest is an IPv4 address and port beyond the namespace, and the
// cgroups allowed it.
type RemoteDest struct {
	Addr    netip.Addr
	Port    int
	Allowed []uint64
}

// Refusal is what the kernel counted of the refused connections of one
// cgroup to one destination of a namespace: Addr is invalid for a local
// destination.
type Refusal struct {
	NS     string
	Cgroup uint64
	Addr   netip.Addr
	Port   int
	Count  uint64
}

// refusedSize bounds each refused set: past it a refusal is still
// refused, only not counted by its pair.
const refusedSize = 65536

// reachTableName is the reach table's name in a namespace: the host's is
// the daemon's own table's name with "-reach", a network's namespace is
// the daemon's alone.
func (f *Firewall) reachTableName(ns string) string {
	if ns == "" {
		return f.table + "-reach"
	}
	return "flyd-reach"
}

// reachState is what a namespace's reach table holds, as written.
type reachState struct {
	tree ReachTree
	sets map[string][][]byte // set name → element keys
}

// SetReach puts the tables in force: each namespace's table is made,
// changed element by element, or deleted when it has no destination. A
// namespace not in tables is gone (its table with it) and forgotten. A
// table a daemon wrote before (one killed included) is taken as the
// kernel holds it, so a restarted daemon that projects the same tables
// changes nothing.
func (f *Firewall) SetReach(tree ReachTree, tables []ReachTable) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reach == nil {
		f.reach = map[string]*reachState{}
	}
	listed := make(map[string]bool, len(tables))
	for _, t := range tables {
		listed[t.NS] = true
	}
	maps.DeleteFunc(f.reach, func(ns string, _ *reachState) bool { return !listed[ns] })
	var errs []error
	for _, t := range tables {
		if err := f.setReach(tree, t); err != nil {
			where := "the host"
			if t.NS != "" {
				where = t.NS
			}
			errs = append(errs, fmt.Errorf("reach rules of %s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

func (f *Firewall) setReach(tree ReachTree, t ReachTable) error {
	c, done, err := connIn(t.NS)
	if err != nil {
		return err
	}
	defer done()
	tbl := &nftables.Table{Name: f.reachTableName(t.NS), Family: nftables.TableFamilyINet}
	want := declaredElements(t)
	empty := len(t.Local) == 0 && len(t.Remote) == 0
	have, ok := f.reach[t.NS]
	if !ok {
		if have, err = readReach(c, tbl); err != nil {
			return err
		}
	}
	switch {
	case empty && have == nil:
		f.reach[t.NS] = nil
		return nil
	case empty:
		c.DelTable(tbl)
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		f.reach[t.NS] = nil
		return nil
	case have == nil || have.tree != tree:
		c.AddTable(tbl)
		c.DelTable(tbl)
		if err := buildDeclared(c, c.AddTable(tbl), tree, want, t.NS == ""); err != nil {
			return err
		}
	default:
		changed := false
		for name, keys := range want {
			gone, added := diffKeys(have.sets[name], keys)
			st := &nftables.Set{Table: tbl, Name: name}
			if err := inChunks(gone, func(ks [][]byte) error { return c.SetDeleteElements(st, elements(ks)) }); err != nil {
				return err
			}
			if err := inChunks(added, func(ks [][]byte) error { return c.SetAddElements(st, elements(ks)) }); err != nil {
				return err
			}
			changed = changed || len(gone)+len(added) > 0
		}
		if !changed {
			f.reach[t.NS] = have
			return nil
		}
	}
	if err := c.Flush(); err != nil {
		delete(f.reach, t.NS) // unknown: read again next time
		return err
	}
	f.reach[t.NS] = &reachState{tree: tree, sets: want}
	return nil
}

// connIn opens an nftables connection in a namespace ("" the host's).
func connIn(ns string) (*nftables.Conn, func(), error) {
	if ns == "" {
		c, err := nftables.New(nftables.WithSockOptions(roomyWrites))
		if err != nil {
			return nil, nil, unavailable(err)
		}
		return c, func() { _ = c.CloseLasting() }, nil
	}
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &pathError{"open", ns, err}
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd), nftables.WithSockOptions(roomyWrites))
	if err != nil {
		unix.Close(fd)
		return nil, nil, unavailable(err)
	}
	return c, func() { _ = c.CloseLasting(); unix.Close(fd) }, nil
}

type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// marker is the comment of a reach table's first rule: what a starting
// daemon checks to take a table as its own and as it would write it.
func marker(tree ReachTree) string {
	return "flyd reach 1 parent " + strconv.FormatUint(tree.Parent, 10) + " level " + strconv.Itoa(tree.Level)
}

// readReach reads a reach table a daemon wrote before: nil when there is
// none, or one this daemon would not have written (its rules are then
// replaced whole).
func readReach(c *nftables.Conn, tbl *nftables.Table) (*reachState, error) {
	if _, err := c.ListTableOfFamily(tbl.Name, tbl.Family); err != nil {
		if errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), "no such file") {
			return nil, nil
		}
		return nil, err
	}
	rules, err := c.GetRules(tbl, &nftables.Chain{Name: "reach", Table: tbl})
	if err != nil || len(rules) == 0 {
		return nil, nil //nolint:nilerr // not as written: rewritten whole
	}
	comment, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment)
	comment = strings.TrimRight(comment, "\x00")
	var tree ReachTree
	if _, err := fmt.Sscanf(comment, "flyd reach 1 parent %d level %d", &tree.Parent, &tree.Level); err != nil || comment != marker(tree) {
		return nil, nil
	}
	st := &reachState{tree: tree, sets: map[string][][]byte{}}
	for _, name := range staticSets {
		elems, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			return nil, nil //nolint:nilerr // a set missing: rewritten whole
		}
		keys := make([][]byte, 0, len(elems))
		for _, e := range elems {
			keys = append(keys, e.Key)
		}
		st.sets[name] = keys
	}
	return st, nil
}
