package netalloc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/errdefs"
)

// Manager owns the reservation tables of every network. It is safe for
// concurrent use: each table has its own lock, so networks allocate in
// parallel while the endpoints of one network are decided one at a time.
type Manager struct {
	store store

	// mu guards tables (the map, not a table's contents); it is never
	// held while a table's own mu is taken, nor a table's while it is.
	mu     sync.Mutex
	tables map[string]*table

	// bindLoopback is the kernel probe of ephemeral allocation, run inside
	// the namespace. Tests replace it to force collisions and failures.
	bindLoopback func() (loopbackProbe, error)
}

// table is one network's reservations, keyed by port, and each
// workload's ports. A change is one workload's: it is decided over the
// table (a change), written to that workload's file and only then put in
// the table, which is what makes every operation all or nothing, at the
// cost of the workload's reservations rather than the network's.
type table struct {
	// mu guards ports and owned, and is held through a whole change:
	// decided, probed in the network's namespace, written to the
	// workload's file and put in the table.
	mu      sync.Mutex
	network string
	ports   map[int]Reservation
	owned   map[string][]int // workload → its ports
}

func newTable(network string, ports map[int]Reservation) *table {
	t := &table{network: network, ports: ports, owned: map[string][]int{}}
	for port, r := range ports {
		t.owned[r.Workload] = append(t.owned[r.Workload], port)
	}
	return t
}

// own is what workload holds in t, by port.
func (t *table) own(workload string) map[int]Reservation {
	out := make(map[int]Reservation, len(t.owned[workload]))
	for _, port := range t.owned[workload] {
		out[port] = t.ports[port]
	}
	return out
}

// change is a table as one workload's change would leave it: the others'
// reservations as they are, and the workload's own as they will be.
type change struct {
	t        *table
	workload string
	own      map[int]Reservation
}

// changing starts a change of workload's reservations from none.
func (t *table) changing(workload string) *change {
	return &change{t: t, workload: workload, own: map[int]Reservation{}}
}

// holder is who would hold port after the change.
func (c *change) holder(port int) (Reservation, bool) {
	if r, ok := c.own[port]; ok {
		return r, true
	}
	r, ok := c.t.ports[port]
	return r, ok && r.Workload != c.workload
}

// changes says whether the change differs from the table.
func (c *change) changes() bool {
	return !maps.Equal(c.own, c.t.own(c.workload))
}

// NewManager loads the tables persisted under dir, creating dir if needed.
// An empty dir keeps the tables in memory only, for tests and tools that
// must not outlive their process.
func NewManager(dir string) (*Manager, error) {
	s := store{dir: dir}
	loaded, err := s.load()
	if err != nil {
		return nil, err
	}
	m := &Manager{store: s, tables: map[string]*table{}, bindLoopback: bindLoopback}
	for network, ports := range loaded {
		m.tables[network] = newTable(network, ports)
	}
	return m, nil
}

// table returns network's table, creating an empty one. Empty tables stay
// in the map: a caller may hold one already, and dropping it would let two
// tables exist for one network.
func (m *Manager) table(network string) *table {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tables[network]
	if !ok {
		t = newTable(network, map[int]Reservation{})
		m.tables[network] = t
	}
	return t
}

// lookup returns network's table without creating one, so that reading
// or releasing a network never leaves an entry behind.
func (m *Manager) lookup(network string) (*table, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tables[network]
	return t, ok
}

func (m *Manager) allTables() []*table {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.tables))
}

// commit writes c's workload's reservations and puts them in the table.
// The caller holds the table's lock.
func (m *Manager) commit(c *change) error {
	t := c.t
	held := slices.Collect(maps.Values(c.own))
	if err := m.store.save(t.network, c.workload, held); err != nil {
		return err
	}
	for _, port := range t.owned[c.workload] {
		delete(t.ports, port)
	}
	delete(t.owned, c.workload)
	for port, r := range c.own {
		t.ports[port] = r
		t.owned[c.workload] = append(t.owned[c.workload], port)
	}
	return nil
}

// holder finds the reservation of one endpoint.
func (t *table) holder(workload, endpoint string) (Reservation, bool) {
	for _, port := range t.owned[workload] {
		if r := t.ports[port]; r.Endpoint == endpoint {
			return r, true
		}
	}
	return Reservation{}, false
}

// Release drops every reservation of the workload in network, or in every
// network when network is "". Releasing what is not held is not an error,
// so a removal interrupted half-way can simply be repeated.
func (m *Manager) Release(workload, network string) error {
	var tables []*table
	if network == "" {
		tables = m.allTables()
	} else if t, ok := m.lookup(network); ok {
		tables = []*table{t}
	}
	var errs []error
	for _, t := range tables {
		t.mu.Lock()
		if len(t.owned[workload]) > 0 {
			errs = append(errs, m.commit(t.changing(workload)))
		}
		t.mu.Unlock()
	}
	return errors.Join(errs...)
}

// ReleasePort hands one reservation back.
func (m *Manager) ReleasePort(network string, port int) error {
	notHeld := fmt.Errorf("%w: port %d in network %s is not reserved", errdefs.ErrNotFound, port, network)
	t, ok := m.lookup(network)
	if !ok {
		return notHeld
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.ports[port]
	if !ok {
		return notHeld
	}
	c := t.changing(r.Workload)
	c.own = t.own(r.Workload)
	delete(c.own, port)
	return m.commit(c)
}

// All returns every reservation, in no order: for callers that look at
// each of thousands and need no order, at the cost of a copy.
func (m *Manager) All() []Reservation {
	var out []Reservation
	for _, t := range m.allTables() {
		t.mu.Lock()
		out = slices.AppendSeq(out, maps.Values(t.ports))
		t.mu.Unlock()
	}
	return out
}

// List returns every reservation, sorted by network, then port.
func (m *Manager) List() []Reservation {
	var out []Reservation
	for _, t := range m.allTables() {
		t.mu.Lock()
		out = append(out, sorted(t.ports)...)
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Reservation) int {
		if c := strings.Compare(a.Network, b.Network); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
	return out
}

// In returns network's reservations, sorted by port.
func (m *Manager) In(network string) []Reservation {
	t, ok := m.lookup(network)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return sorted(t.ports)
}

// Held returns what workload holds in network, sorted by port.
func (m *Manager) Held(network, workload string) []Reservation {
	t, ok := m.lookup(network)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return sorted(t.own(workload))
}

// Networks returns the names of networks with at least one reservation,
// sorted; the sandbox removes a namespace once its network leaves this list.
func (m *Manager) Networks() []string {
	var out []string
	for _, t := range m.allTables() {
		t.mu.Lock()
		if len(t.ports) > 0 {
			out = append(out, t.network)
		}
		t.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// InUse reports whether network has any reservation.
func (m *Manager) InUse(network string) bool {
	t, ok := m.lookup(network)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ports) > 0
}
