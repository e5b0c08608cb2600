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

	mu     sync.Mutex
	tables map[string]*table

	// bindLoopback is the kernel probe of ephemeral allocation, run inside
	// the namespace. Tests replace it to force collisions and failures.
	bindLoopback func() (loopbackProbe, error)
}

// table is one network's reservations, keyed by port. A change is built
// on a copy and swapped in only once it is on disk, which is what makes
// every operation all or nothing.
type table struct {
	mu      sync.Mutex
	network string
	ports   map[int]Reservation
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
		m.tables[network] = &table{network: network, ports: ports}
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
		t = &table{network: network, ports: map[int]Reservation{}}
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

// commit persists next, in which only workload's reservations differ
// from the table's, and makes it the table. The caller holds t.mu.
func (m *Manager) commit(t *table, next map[int]Reservation, workload string) error {
	var held []Reservation
	for _, r := range next {
		if r.Workload == workload {
			held = append(held, r)
		}
	}
	if err := m.store.save(t.network, workload, held); err != nil {
		return err
	}
	t.ports = next
	return nil
}

// holder finds the reservation of one endpoint. Tables hold a few ports
// per workload, so a scan costs less than keeping a second index right.
func (t *table) holder(workload, endpoint string) (Reservation, bool) {
	for _, r := range t.ports {
		if r.Workload == workload && r.Endpoint == endpoint {
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
		next := maps.Clone(t.ports)
		maps.DeleteFunc(next, func(_ int, r Reservation) bool { return r.Workload == workload })
		if len(next) != len(t.ports) {
			errs = append(errs, m.commit(t, next, workload))
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
	next := maps.Clone(t.ports)
	delete(next, port)
	return m.commit(t, next, r.Workload)
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
	var out []Reservation
	for _, r := range t.ports {
		if r.Workload == workload {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Reservation) int { return a.Port - b.Port })
	return out
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
