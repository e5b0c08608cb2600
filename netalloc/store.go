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
)

// store keeps one JSON file per network so that a write touches only the
// network that changed, and a damaged file loses one network, not all.
// An empty dir keeps tables in memory only.
type store struct{ dir string }

// tableFile is the on-disk form. version lets a later flyd migrate files
// it finds rather than misread them.
type tableFile struct {
	Version      int           `json:"version"`
	Reservations []Reservation `json:"reservations"`
}

const (
	fileVersion = 1
	fileExt     = ".json"
)

func (s store) path(network string) string { return filepath.Join(s.dir, network+fileExt) }

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
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("port tables: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if atomicfile.IsTemp(name) {
			// A write that crashed before its rename; the table it was
			// replacing is still whole.
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil {
				return nil, fmt.Errorf("port tables: sweep: %w", err)
			}
			continue
		}
		if e.IsDir() || !strings.HasSuffix(name, fileExt) || strings.HasPrefix(name, ".") {
			continue
		}
		network := strings.TrimSuffix(name, fileExt)
		ports, err := s.read(network)
		if err != nil {
			return nil, err
		}
		if len(ports) > 0 {
			out[network] = ports
		}
	}
	return out, nil
}

func (s store) read(network string) (map[int]Reservation, error) {
	p := s.path(network)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: port table %s: %s", errdefs.ErrInternal, p, fmt.Sprintf(format, args...))
	}
	if err := checkNetwork(network); err != nil {
		return nil, fail("file name is not a network name")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("port table: %w", err)
	}
	var f tableFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fail("%v", err)
	}
	if f.Version != fileVersion {
		return nil, fail("version %d, this flyd reads %d", f.Version, fileVersion)
	}
	ports := make(map[int]Reservation, len(f.Reservations))
	holders := map[[2]string]bool{}
	for _, r := range f.Reservations {
		req := Request{Endpoint: r.Endpoint, Mode: r.Mode, Port: r.Port}
		if r.Mode == ModeEphemeral {
			req.Port = 0 // a stored ephemeral has its number; check it as a fixed one
		}
		switch err := req.check(r.Workload); {
		case r.Network != network:
			return nil, fail("reservation of port %d names network %q", r.Port, r.Network)
		case err != nil:
			return nil, fail("%v", err)
		case r.Port < 1 || r.Port > 65535:
			return nil, fail("port %d outside 1..65535", r.Port)
		}
		if _, dup := ports[r.Port]; dup {
			return nil, fail("port %d reserved twice", r.Port)
		}
		h := [2]string{r.Workload, r.Endpoint}
		if holders[h] {
			return nil, fail("workload %s endpoint %s holds two ports", r.Workload, r.Endpoint)
		}
		holders[h] = true
		ports[r.Port] = r
	}
	return ports, nil
}

// save replaces network's file with ports, or removes it when ports is
// empty. The rename is atomic, so a daemon that dies mid-write leaves the
// old table or the new one, never a prefix. Nothing is synced: the tables
// live with the runtime state (tmpfs), which a machine crash erases
// together with the processes that held the ports.
func (s store) save(network string, ports map[int]Reservation) (err error) {
	if s.dir == "" {
		return nil
	}
	final := s.path(network)
	if len(ports) == 0 {
		if err := os.Remove(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("port table: %w", err)
		}
		return nil
	}
	data, err := json.MarshalIndent(tableFile{Version: fileVersion, Reservations: sorted(ports)}, "", "  ")
	if err != nil {
		return fmt.Errorf("port table %s: %w", network, err)
	}
	if err := atomicfile.Replace(final, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("port table %s: %w", network, err)
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
