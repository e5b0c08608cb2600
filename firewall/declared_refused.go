package firewall

// Reading the refusals the reach tables count.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
)

// Refusals reads the refused sets of every namespace that has a reach
// table: a count per cgroup and destination since the table was made.
func (f *Firewall) Refusals() ([]Refusal, error) {
	f.mu.Lock()
	nss := make([]string, 0, len(f.reach))
	for ns, st := range f.reach {
		if st != nil {
			nss = append(nss, ns)
		}
	}
	f.mu.Unlock()
	slices.Sort(nss)
	var out []Refusal
	var errs []error
	for _, ns := range nss {
		rs, err := f.refusalsIn(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, rs...)
	}
	return out, errors.Join(errs...)
}

func (f *Firewall) refusalsIn(ns string) ([]Refusal, error) {
	c, done, err := connIn(ns)
	if err != nil {
		return nil, err
	}
	defer done()
	tbl := &nftables.Table{Name: f.reachTableName(ns), Family: nftables.TableFamilyINet}
	var out []Refusal
	for _, name := range []string{setRefusedLocal, setRefusedRemote} {
		elems, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", name, tbl.Name, err)
		}
		for _, e := range elems {
			r, ok := refusalOf(ns, name, e)
			if ok {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// refusalOf decodes a refused set's element.
func refusalOf(ns, set string, e nftables.SetElement) (Refusal, bool) {
	k := e.Key
	r := Refusal{NS: ns}
	switch {
	case set == setRefusedLocal && len(k) == 12:
		r.Port = int(binary.BigEndian.Uint16(k[8:10]))
	case set == setRefusedRemote && len(k) == 16:
		r.Addr = netip.AddrFrom4([4]byte(k[8:12]))
		r.Port = int(binary.BigEndian.Uint16(k[12:14]))
	default:
		return r, false
	}
	r.Cgroup = binaryutil.NativeEndian.Uint64(k[:8])
	if e.Counter != nil {
		r.Count = e.Counter.Packets
	}
	return r, true
}

// ReachNamespaces lists the namespaces the firewall holds a reach table
// in, "" for the host's.
func (f *Firewall) ReachNamespaces() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ns := range slices.Sorted(maps.Keys(f.reach)) {
		if f.reach[ns] != nil {
			out = append(out, ns)
		}
	}
	return out
}
