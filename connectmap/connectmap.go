// Package connectmap takes a host-local client of a published port to the
// port's network at connect(), instead of at every packet: a cgroup
// connect4 BPF program, attached at the root of the unified cgroup v2
// hierarchy, rewrites a TCP connect() in the daemon's network namespace
// to an address and port of its map into the network's address and inner
// port, once; a getpeername4 program gives the socket back the address it
// dialled. The connection then crosses the link as the host's own
// traffic to the network's address, with no NAT on the host.
//
// The programs are attached through BPF links held by the daemon's
// process, never pinned: a daemon that exits, or is killed, takes them
// with it, and the nftables rules (package firewall), which stay written
// whatever this package does, forward the port as before. Links attach
// beside other programs (the kernel's multi-attach), so another daemon's
// and other software's programs at the same hook stay as they are.
//
// The programs are written as instructions (cilium/ebpf's asm): nothing is
// compiled or read from outside. The map's contents are the caller's to
// keep (package netplane's); what the program does with them is in
// prog.go.
package connectmap

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// MaxPorts is how many ports a target may balance over: a group with
// more replicas is left to nftables.
const MaxPorts = 16

// Target is where a connection to a key goes: Addr at Ports[0], or at the
// next of Ports in turn, from the first each time the entry is written.
type Target struct {
	Addr  netip.Addr
	Ports []uint16
}

// Map is a daemon's programs, attached, and their map. It is safe for
// concurrent use.
type Map struct {
	cgroup string
	// mu guards the fields below; the maps, programs and links are set at
	// Open and dropped by Close.
	mu    sync.Mutex
	ports *ebpf.Map // key → target
	peers *ebpf.Map // socket cookie → what it dialled and where it went
	progs []*ebpf.Program
	links []link.Link
	// have is what the map holds, as Set wrote it.
	have map[netip.AddrPort]Target
}

// Config is what a Map is opened with.
type Config struct {
	// Cgroup is the cgroup v2 directory the programs attach at; "" for the
	// root of the unified hierarchy (Root).
	Cgroup string
	// NetNS is the network namespace cookie whose connections are
	// rewritten; 0 for the caller's own.
	NetNS uint64
}

// Open loads the programs and attaches them. An error says why the kernel
// cannot (no CAP_BPF or CAP_NET_ADMIN, no cgroup2 mounted at its root, a
// kernel before 5.14: the namespace cookie of a socket, beside BPF links
// for cgroups, 5.7, and an atomic fetch-and-add, 5.12); nothing is left
// attached then.
func Open(cfg Config) (m *Map, err error) {
	if cfg.Cgroup == "" {
		if cfg.Cgroup, err = Root(); err != nil {
			return nil, err
		}
	}
	if cfg.NetNS == 0 {
		if cfg.NetNS, err = OwnNetNS(); err != nil {
			return nil, err
		}
	}
	// BPF memory is charged to the cgroup (Linux 5.11), never to
	// RLIMIT_MEMLOCK on the kernels that get this far (5.14): the limit,
	// which workloads would inherit, is left as it is.
	made := &Map{cgroup: cfg.Cgroup, have: map[netip.AddrPort]Target{}}
	defer func() {
		if err != nil {
			made.Close()
		}
	}()
	m = made
	if m.ports, err = ebpf.NewMap(&ebpf.MapSpec{Name: "flyd_ports", Type: ebpf.Hash,
		KeySize: keySize, ValueSize: targetSize, MaxEntries: maxKeys}); err != nil {
		return nil, fmt.Errorf("BPF map of published ports: %w", err)
	}
	if m.peers, err = ebpf.NewMap(&ebpf.MapSpec{Name: "flyd_peers", Type: ebpf.LRUHash,
		KeySize: 8, ValueSize: peerSize, MaxEntries: maxPeers}); err != nil {
		return nil, fmt.Errorf("BPF map of rewritten peers: %w", err)
	}
	cg, err := os.Open(cfg.Cgroup)
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 root: %w", err)
	}
	defer cg.Close()
	for _, p := range []struct {
		name   string
		attach ebpf.AttachType
		insns  func() asm.Instructions
	}{
		{"flyd_connect4", ebpf.AttachCGroupInet4Connect, func() asm.Instructions { return connect4(m.ports.FD(), m.peers.FD(), cfg.NetNS) }},
		{"flyd_peer4", ebpf.AttachCgroupInet4GetPeername, func() asm.Instructions { return getpeername4(m.peers.FD()) }},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: p.name, Type: ebpf.CGroupSockAddr,
			AttachType: p.attach, Instructions: p.insns(), License: "Apache-2.0"})
		if err != nil {
			return nil, fmt.Errorf("load BPF program %s: %w", p.name, err)
		}
		m.progs = append(m.progs, prog)
		// A BPF link alone: a program attached the older way would stay
		// in the cgroup after the daemon's death.
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: int(cg.Fd()), Program: prog, Attach: p.attach})
		if err != nil {
			return nil, fmt.Errorf("attach BPF program %s at %s (BPF links for cgroups: Linux 5.7): %w", p.name, cfg.Cgroup, err)
		}
		m.links = append(m.links, l)
	}
	return m, nil
}

// Close detaches the programs and frees the maps: connections made
// afterwards go through nftables.
func (m *Map) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, l := range m.links {
		errs = append(errs, l.Close())
	}
	for _, p := range m.progs {
		errs = append(errs, p.Close())
	}
	for _, mp := range []*ebpf.Map{m.ports, m.peers} {
		if mp != nil {
			errs = append(errs, mp.Close())
		}
	}
	m.links, m.progs, m.ports, m.peers = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Cgroup is where the programs are attached.
func (m *Map) Cgroup() string { return m.cgroup }

// Programs are the kernel's ids of the programs, for a check that they are
// attached (or gone).
func (m *Map) Programs() []ebpf.ProgramID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ebpf.ProgramID
	for _, p := range m.progs {
		if info, err := p.Info(); err == nil {
			if id, ok := info.ID(); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// Set makes the map hold exactly want: entries gone are deleted, new or
// changed ones written. A target with no port, more than MaxPorts, or not
// IPv4, and a key not IPv4, is refused whole, the map unchanged.
func (m *Map) Set(want map[netip.AddrPort]Target) error {
	for k, t := range want {
		if !k.Addr().Is4() || k.Port() == 0 || !t.Addr.Is4() || len(t.Ports) == 0 || len(t.Ports) > MaxPorts {
			return fmt.Errorf("connectmap: %v → %v %v: an IPv4 address and port to an IPv4 address and 1 to %d ports", k, t.Addr, t.Ports, MaxPorts)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ports == nil {
		return errors.New("connectmap: the map is closed")
	}
	var errs []error
	for k := range m.have {
		if _, ok := want[k]; !ok {
			key := keyOf(k)
			if err := m.ports.Delete(key[:]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("delete %v: %w", k, err))
				continue
			}
			delete(m.have, k)
		}
	}
	for k, t := range want {
		if had, ok := m.have[k]; ok && had.Addr == t.Addr && equalPorts(had.Ports, t.Ports) {
			continue
		}
		key, val := keyOf(k), valueOf(t)
		if err := m.ports.Put(key[:], val[:]); err != nil {
			errs = append(errs, fmt.Errorf("put %v: %w", k, err))
			continue
		}
		m.have[k] = Target{Addr: t.Addr, Ports: append([]uint16(nil), t.Ports...)}
	}
	return errors.Join(errs...)
}

// Entries reads the map from the kernel.
func (m *Map) Entries() (map[netip.AddrPort]Target, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ports == nil {
		return nil, errors.New("connectmap: the map is closed")
	}
	out := map[netip.AddrPort]Target{}
	var k [keySize]byte
	var v [targetSize]byte
	it := m.ports.Iterate()
	for it.Next(&k, &v) {
		key, t := parseKey(k), parseValue(v)
		out[key] = t
	}
	return out, it.Err()
}

func equalPorts(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Root is the root of the unified cgroup v2 hierarchy: /sys/fs/cgroup on
// a v2 host, a hybrid host's cgroup2 mount beside its v1 trees (often
// /sys/fs/cgroup/unified). Only a mount of the hierarchy's root will do:
// a program attached lower sees only the connections of that subtree.
func Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	found := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 || tail[0] != "cgroup2" || fields[3] != "/" {
			continue
		}
		if fields[4] == "/sys/fs/cgroup" {
			return fields[4], nil
		}
		if found == "" {
			found = fields[4]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if found == "" {
		return "", errors.New("no cgroup2 hierarchy is mounted at its root")
	}
	return found, nil
}

// OwnNetNS is the cookie of the caller's network namespace (SO_NETNS_COOKIE,
// Linux 5.14), as the program's bpf_get_netns_cookie sees it.
func OwnNetNS() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var c uint64
	size := uint32(unsafe.Sizeof(c))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_NETNS_COOKIE,
		uintptr(unsafe.Pointer(&c)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		return 0, fmt.Errorf("network namespace cookie (SO_NETNS_COOKIE: Linux 5.14): %w", e)
	}
	return c, nil
}

// Attachment is one connect map attached at a cgroup, as the kernel
// holds it: its connect4 program and its entries.
type Attachment struct {
	Program ebpf.ProgramID
	Entries map[netip.AddrPort]Target
}

// Attached lists the connect maps attached at a cgroup, every daemon's:
// the connect4 programs named as this package names them, with their
// maps' entries. It is for a check from outside a daemon (its tests, a
// leftover check): the kernel answers, not a daemon.
func Attached(cgroup string) ([]Attachment, error) {
	f, err := os.Open(cgroup)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: ebpf.AttachCGroupInet4Connect})
	if err != nil {
		return nil, err
	}
	var out []Attachment
	for _, p := range r.Programs {
		a, ok, err := attachment(p.ID)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // detached meanwhile
			}
			return nil, err
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, nil
}

func attachment(id ebpf.ProgramID) (Attachment, bool, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return Attachment{}, false, err
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil || info.Name != "flyd_connect4" {
		return Attachment{}, false, err
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return Attachment{}, false, err
		}
		mi, err := m.Info()
		if err != nil || mi.Name != "flyd_ports" {
			m.Close()
			continue
		}
		a := Attachment{Program: id, Entries: map[netip.AddrPort]Target{}}
		var k [keySize]byte
		var v [targetSize]byte
		it := m.Iterate()
		for it.Next(&k, &v) {
			a.Entries[parseKey(k)] = parseValue(v)
		}
		err = it.Err()
		m.Close()
		return a, true, err
	}
	return Attachment{}, false, nil
}
