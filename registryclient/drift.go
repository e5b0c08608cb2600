package registryclient

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// The drift check of the Service Registry Contract (R8): the live registry
// against a static reference, port by port. The reference is the format the
// registry exports (koder-service-ports.toml: one [[service]] table an
// instance, with name, port and, when known, container and service).

// Drift kinds.
const (
	// DriftMissing: the reference holds the port; nothing live does.
	DriftMissing = "missing"
	// DriftExtra: an instance holds a port the reference does not name.
	DriftExtra = "extra"
	// DriftOwnerMismatch: the port is held, by another service (or
	// container) than the reference says.
	DriftOwnerMismatch = "owner_mismatch"
)

// Drift is one port where the registry and the reference disagree.
type Drift struct {
	Kind string `json:"kind"`
	Port int    `json:"port"`
	// Want is what the reference says holds the port, Got what does:
	// "name" or "name (container C)".
	Want string `json:"want,omitempty"`
	Got  string `json:"got,omitempty"`
}

func (d Drift) String() string {
	switch d.Kind {
	case DriftMissing:
		return fmt.Sprintf("missing         %5d  %s", d.Port, d.Want)
	case DriftExtra:
		return fmt.Sprintf("extra           %5d  %s", d.Port, d.Got)
	}
	return fmt.Sprintf("owner_mismatch  %5d  want %s, got %s", d.Port, d.Want, d.Got)
}

// Owner is who holds a port as the drift check compares it: a service's
// name, and its container when the entry says one.
type Owner struct {
	Name      string `toml:"name"`
	Port      int    `toml:"port"`
	Container string `toml:"container"`
}

func (o Owner) String() string {
	if o.Container == "" {
		return o.Name
	}
	return o.Name + " (container " + o.Container + ")"
}

// ParseReference reads a reference in the export's format. Every entry
// needs a name and a port in 1–65535; keys the check does not use are
// allowed (a reference may be an earlier export).
func ParseReference(r io.Reader) ([]Owner, error) {
	var doc struct {
		Service []Owner `toml:"service"`
	}
	if _, err := toml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	for i, o := range doc.Service {
		if o.Name == "" || o.Port < 1 || o.Port > 65535 {
			return nil, fmt.Errorf("reference: service %d: needs a name and a port from 1 to 65535", i+1)
		}
	}
	return doc.Service, nil
}

// OwnerOf is an instance as the drift check sees it: its name, and its
// container label (metadata, or a container= tag; R5).
func OwnerOf(in Instance) Owner {
	o := Owner{Name: in.Name, Port: in.Port, Container: in.Metadata["container"]}
	for _, t := range in.Tags {
		if k, v, ok := strings.Cut(t, "="); o.Container == "" && ok && k == "container" {
			o.Container = v
		}
	}
	return o
}

// CheckDrift compares the live owners of ports with the reference's,
// sorted by port. A port the reference names is matched by any live
// instance on it of that name (and container, where the reference says
// one); several instances of one service on a port are not drift.
func CheckDrift(reference, live []Owner) []Drift {
	byPort := func(os []Owner) map[int][]Owner {
		m := map[int][]Owner{}
		for _, o := range os {
			m[o.Port] = append(m[o.Port], o)
		}
		return m
	}
	ref, got := byPort(reference), byPort(live)
	var out []Drift
	for port, want := range ref {
		have := got[port]
		if len(have) == 0 {
			out = append(out, Drift{Kind: DriftMissing, Port: port, Want: names(want)})
			continue
		}
		for _, h := range have {
			if !slices.ContainsFunc(want, func(w Owner) bool {
				return w.Name == h.Name && (w.Container == "" || w.Container == h.Container)
			}) {
				out = append(out, Drift{Kind: DriftOwnerMismatch, Port: port, Want: names(want), Got: h.String()})
			}
		}
	}
	for port, have := range got {
		if _, ok := ref[port]; !ok {
			out = append(out, Drift{Kind: DriftExtra, Port: port, Got: names(have)})
		}
	}
	slices.SortFunc(out, func(a, b Drift) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Got, b.Got))
	})
	return out
}

func names(os []Owner) string {
	s := make([]string, 0, len(os))
	for _, o := range os {
		s = append(s, o.String())
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ", ")
}
