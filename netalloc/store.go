package netalloc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/atomicfile"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/internal/dnslabel"
)

// store keeps one JSON file per workload and network,
// DIR/NETWORK/WORKLOAD.json, so that a change writes what that workload
// holds and nothing else (an apply among thousands costs the same as the
// first), and a damaged file loses one workload, not all. An empty dir
// keeps tables in memory only. Files of the first layout, one per network
// (DIR/NETWORK.json, version 1), are read and rewritten in this one.
type store struct{ dir string }

// tableFile is the on-disk form. version lets a later flyd migrate files
// it finds rather than misread them.
type tableFile struct {
	Version      int           `json:"version"`
	Reservations []Reservation `json:"reservations"`
}

const (
	fileVersion    = 2 // a workload's file
	networkVersion = 1 // a network's file, the first layout
	fileExt        = ".json"
)

func (s store) path(network, workload string) string {
	return filepath.Join(s.dir, network, workload+fileExt)
}

// load reads every table in the directory. A file that does not parse is
// an error rather than an empty table: starting without it would hand its
// ports to other workloads.
func (s store) load() (map[string]map[int]Reservation, error) {
	out := map[string]map[int]Reservation{}
	if s.dir == "" {
		return out, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("port tables: %w", err)
	}
	entries, err := sweptDir(s.dir)
	if err != nil {
		return nil, err
	}
	var legacy []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
		case e.IsDir():
			ports, err := s.readNetwork(name)
			if err != nil {
				return nil, err
			}
			if len(ports) > 0 {
				out[name] = ports
			}
		case strings.HasSuffix(name, fileExt):
			legacy = append(legacy, strings.TrimSuffix(name, fileExt))
		}
	}
	for _, network := range legacy {
		if err := s.migrate(network, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sweptDir lists dir after removing the temporary files of writes that
// crashed before their rename (the file each was replacing is whole).
func sweptDir(dir string) ([]fs.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("port tables: %w", err)
	}
	kept := entries[:0]
	for _, e := range entries {
		if !atomicfile.IsTemp(e.Name()) {
			kept = append(kept, e)
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("port tables: sweep: %w", err)
		}
	}
	return kept, nil
}

// readNetwork reads the workloads' files of one network into its table.
func (s store) readNetwork(network string) (map[int]Reservation, error) {
	dir := filepath.Join(s.dir, network)
	if err := checkNetwork(network); err != nil {
		return nil, fmt.Errorf("%w: port tables: %s: directory name is not a network name", errdefs.ErrInternal, dir)
	}
	entries, err := sweptDir(dir)
	if err != nil {
		return nil, err
	}
	t := tableOf(network)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, fileExt) || strings.HasPrefix(name, ".") {
			continue
		}
		workload := strings.TrimSuffix(name, fileExt)
		if err := t.read(filepath.Join(dir, name), fileVersion, workload); err != nil {
			return nil, err
		}
	}
	return t.ports, nil
}

// migrate rewrites a network's file of the first layout as its
// workloads' files, then removes it. A migration that crashed before the
// removal left some of those files written; the old file is still the
// whole table, and wins.
func (s store) migrate(network string, tables map[string]map[int]Reservation) error {
	old := filepath.Join(s.dir, network+fileExt)
	if err := checkNetwork(network); err != nil {
		return fmt.Errorf("%w: port table %s: file name is not a network name", errdefs.ErrInternal, old)
	}
	t := tableOf(network)
	if err := t.read(old, networkVersion, ""); err != nil {
		return err
	}
	byWorkload := map[string][]Reservation{}
	for _, r := range t.ports {
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	for workload, rs := range byWorkload {
		if err := s.save(network, workload, rs); err != nil {
			return err
		}
	}
	delete(tables, network)
	if len(t.ports) > 0 {
		tables[network] = t.ports
	}
	if err := os.Remove(old); err != nil {
		return fmt.Errorf("port table: %w", err)
	}
	return nil
}

// loading is a table being read, with what its files must not repeat.
type loading struct {
	network string
	ports   map[int]Reservation
	holders map[[2]string]bool
}

func tableOf(network string) *loading {
	return &loading{network: network, ports: map[int]Reservation{}, holders: map[[2]string]bool{}}
}

// read adds the reservations of the file at p, of version, to t; a
// workload's file (workload not "") holds that workload's alone.
func (t *loading) read(p string, version int, workload string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: port table %s: %s", errdefs.ErrInternal, p, fmt.Sprintf(format, args...))
	}
	if workload != "" && !dnslabel.ValidFull(workload) {
		return fail("file name is not a workload name")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("port table: %w", err)
	}
	var f tableFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fail("%v", err)
	}
	if f.Version != version {
		return fail("version %d, this flyd reads %d here", f.Version, version)
	}
	for _, r := range f.Reservations {
		req := Request{Endpoint: r.Endpoint, Mode: r.Mode, Port: r.Port}
		if r.Mode == ModeEphemeral {
			req.Port = 0 // a stored ephemeral has its number; check it as a fixed one
		}
		switch err := req.check(r.Workload); {
		case r.Network != t.network:
			return fail("reservation of port %d names network %q", r.Port, r.Network)
		case workload != "" && r.Workload != workload:
			return fail("reservation of port %d names workload %q", r.Port, r.Workload)
		case err != nil:
			return fail("%v", err)
		case r.Port < 1 || r.Port > 65535:
			return fail("port %d outside 1..65535", r.Port)
		}
		if _, dup := t.ports[r.Port]; dup {
			return fail("port %d reserved twice", r.Port)
		}
		h := [2]string{r.Workload, r.Endpoint}
		if t.holders[h] {
			return fail("workload %s endpoint %s holds two ports", r.Workload, r.Endpoint)
		}
		t.holders[h] = true
		t.ports[r.Port] = r
	}
	return nil
}

// save replaces what workload holds in network with rs, removing its file
// when rs is empty (and the network's directory with its last file). The
// rename is atomic, so a daemon that dies mid-write leaves the old file or
// the new one, never a prefix. Nothing is synced: the tables live with
// the runtime state (tmpfs), which a machine crash erases together with
// the processes that held the ports. The caller holds the network's
// table lock.
func (s store) save(network, workload string, rs []Reservation) error {
	if s.dir == "" {
		return nil
	}
	final := s.path(network, workload)
	if len(rs) == 0 {
		if err := os.Remove(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("port table: %w", err)
		}
		// The directory goes with its last workload; one still in use
		// refuses.
		_ = os.Remove(filepath.Dir(final))
		return nil
	}
	slices.SortFunc(rs, func(a, b Reservation) int { return a.Port - b.Port })
	data, err := json.MarshalIndent(tableFile{Version: fileVersion, Reservations: rs}, "", "  ")
	if err != nil {
		return fmt.Errorf("port table %s/%s: %w", network, workload, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("port table: %w", err)
	}
	if err := atomicfile.Replace(final, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("port table %s/%s: %w", network, workload, err)
	}
	return nil
}

func sorted(ports map[int]Reservation) []Reservation {
	out := make([]Reservation, 0, len(ports))
	for _, r := range ports {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Reservation) int { return a.Port - b.Port })
	return out
}
