package spec

import (
	"cmp"
	"slices"
	"strings"
)

// Runtime is what a spec must know of a kind of workload (Kind): the rules
// its specs follow and its own section of settings, if it has one. The
// runtime's driver (package driver/…) runs it; the kind's file here
// registers it. A new runtime is its driver's folder, its file here, and
// its line where the daemon makes its drivers.
type Runtime struct {
	Kind Kind
	// Rank orders the kinds as flyd shows them.
	Rank int
	// InContainer says its process runs in a container's root, out of the
	// daemon's reach: no notify socket, no command run beside the run
	// (reload.exec, watch exec); its files change by sync.
	InContainer bool
	// ImageCommand says the command may be left out: the image brings it.
	ImageCommand bool
	// RunsNothing says it stands for a service outside the host: no
	// process, its endpoints at the addresses the spec gives.
	RunsNothing bool
	// Section is the spec's field of the kind's own settings ("nix"), ""
	// for none; Has says whether a spec sets it. A spec of another kind
	// that sets it is refused.
	Section string
	Has     func(w *Workload) bool
	// Validate checks what is the kind's own in a spec of the kind; nil
	// for nothing.
	Validate func(w *Workload, p *problems)
}

var runtimes []Runtime

// Kinds are every kind, in the order flyd shows them.
var Kinds []Kind

// registerRuntime adds a kind to the table; each kind's file registers it
// from init. A kind registered twice is a programming error.
func registerRuntime(r Runtime) {
	if r.Kind == "" || slices.ContainsFunc(runtimes, func(o Runtime) bool { return o.Kind == r.Kind }) {
		panic("spec: runtime " + string(r.Kind) + " registered twice, or without a kind")
	}
	if _, ok := DocKindOf(string(r.Kind)); ok {
		panic("spec: runtime " + string(r.Kind) + " is a document's kind")
	}
	if (r.Section == "") != (r.Has == nil) {
		panic("spec: runtime " + string(r.Kind) + ": a section needs Has, and Has a section")
	}
	runtimes = append(runtimes, r)
	slices.SortFunc(runtimes, func(a, b Runtime) int { return cmp.Compare(a.Rank, b.Rank) })
	Kinds = Kinds[:0]
	for _, rt := range runtimes {
		Kinds = append(Kinds, rt.Kind)
	}
}

// RuntimeOf is the table's entry of kind k, if k is a kind.
func RuntimeOf(k Kind) (Runtime, bool) {
	i := slices.IndexFunc(runtimes, func(r Runtime) bool { return r.Kind == k })
	if i < 0 {
		return Runtime{}, false
	}
	return runtimes[i], true
}

// runtime is w's kind's entry; an unknown kind (refused by validateKind)
// has none of the table's properties.
func (w *Workload) runtime() Runtime {
	r, _ := RuntimeOf(w.Kind)
	return r
}

// kindsWhere names the kinds for which keep holds, for a message:
// "native and nix", "native, nix or containerd" (with or).
func kindsWhere(keep func(Runtime) bool, conj string) string {
	var names []string
	for _, r := range runtimes {
		if keep(r) {
			names = append(names, string(r.Kind))
		}
	}
	switch len(names) {
	case 0:
		return "no kind"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// outsideContainers names the kinds whose process the daemon reaches: a
// notify socket, a command beside the run.
func outsideContainers() string {
	return kindsWhere(func(r Runtime) bool { return !r.InContainer && !r.RunsNothing }, "and")
}
