package specload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flyd-dev/flyd/internal/dnslabel"
	"github.com/flyd-dev/flyd/spec"
)

// AllProfiles, asked for as a profile, selects every profile, as compose's
// "*" does.
const AllProfiles = "*"

// Profiles are the profiles asked for: the flags (--profile) when any is
// given, else env (FLYD_PROFILES, comma-separated, as COMPOSE_PROFILES).
// Each is a DNS label, or AllProfiles.
func Profiles(flags []string, env string) ([]string, error) {
	out := flags
	if len(out) == 0 {
		for p := range strings.SplitSeq(env, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	for _, p := range out {
		if p != AllProfiles && !dnslabel.Valid(p) {
			return nil, fmt.Errorf("profile %q: a profile's name must be %s", p, dnslabel.Rule)
		}
	}
	return out, nil
}

// LeftOut is a workload left out because none of its profiles is asked for.
type LeftOut struct {
	Name     string
	Profiles []string
}

// Selection is what Select did.
type Selection struct {
	LeftOut []LeftOut
	// Unused are the profiles asked for that no workload has.
	Unused []string
}

// Select leaves out of d the workloads that have profiles none of which
// is asked for; a workload without profiles is always in. A workload that
// is in and names one left out in its after or uses is an error naming
// both: compose would start the one left out, flyd does only what the
// profiles say, so that what is left out never runs unasked.
func Select(d *spec.Documents, profiles []string) (Selection, error) {
	var sel Selection
	asked := map[string]bool{}
	for _, p := range profiles {
		asked[p] = true
	}
	used := map[string]bool{}
	kept := d.Workloads[:0:0]
	for _, w := range d.Workloads {
		in := len(w.Profiles) == 0 || asked[AllProfiles]
		for _, p := range w.Profiles {
			used[p] = true
			in = in || asked[p]
		}
		if in {
			kept = append(kept, w)
			continue
		}
		sel.LeftOut = append(sel.LeftOut, LeftOut{Name: w.Name, Profiles: slices.Clone(w.Profiles)})
	}
	for _, p := range profiles {
		if p != AllProfiles && !used[p] && !slices.Contains(sel.Unused, p) {
			sel.Unused = append(sel.Unused, p)
		}
	}
	if err := NeedsLeftOut(kept, sel.LeftOut); err != nil {
		return sel, err
	}
	d.Workloads = kept
	return sel, nil
}

// NeedsLeftOut refuses a workload of ws that names, in its after or uses,
// one of out, naming both.
func NeedsLeftOut(ws []*spec.Workload, out []LeftOut) error {
	if len(out) == 0 {
		return nil
	}
	left := make(map[string]LeftOut, len(out))
	for _, l := range out {
		left[l.Name] = l
	}
	for _, w := range ws {
		for _, dep := range w.Prerequisites() {
			name, _ := spec.ParseAfter(dep)
			if l, ok := left[name]; ok {
				return fmt.Errorf("workload %s needs %s (after or uses), which is left out: none of its profiles (%s) is asked for",
					w.Name, name, strings.Join(l.Profiles, ", "))
			}
		}
	}
	return nil
}
