package spec

import (
	"slices"
	"strings"
)

// What an `after` entry waits for: "NAME" or "NAME:CONDITION".
const (
	// AfterHealthy waits until the workload runs and, when it has a health
	// check, has passed it: the default.
	AfterHealthy = "healthy"
	// AfterStarted waits until it runs, whatever its health.
	AfterStarted = "started"
	// AfterCompleted waits until it has exited 0: a one-shot, such as a
	// database's initialisation.
	AfterCompleted = "completed"
)

// AfterFollows ends an `after` entry whose workload follows the one it
// names ("pg:healthy+restart"), as compose's depends_on restart and
// systemd's PartOf=: when that one's run ends (a restart, a replace, a
// stop), this one's is stopped, and it starts again once that one is
// ready again.
const AfterFollows = "+restart"

// Follows says whether an `after` entry follows its workload
// (AfterFollows).
func Follows(entry string) bool { return strings.HasSuffix(entry, AfterFollows) }

// ParseAfter splits an `after` entry into the workload it names and the
// condition waited for (AfterHealthy when the entry gives none).
func ParseAfter(entry string) (name, condition string) {
	entry = strings.TrimSuffix(entry, AfterFollows)
	name, condition, ok := strings.Cut(entry, ":")
	if !ok {
		condition = AfterHealthy
	}
	return name, condition
}

// AfterNames are the workloads an `after` list names, in its order.
func AfterNames(after []string) []string {
	out := make([]string, len(after))
	for i, e := range after {
		out[i], _ = ParseAfter(e)
	}
	return out
}

// ParseUse splits a `uses` entry into the workload and the endpoint ("" for
// all of its endpoints).
func ParseUse(entry string) (workload, endpoint string) {
	workload, endpoint, _ = strings.Cut(entry, "/")
	return workload, endpoint
}

// Prerequisites is the workload's `after` list with every used workload
// not already in it, waited for healthy: what must be ready before a run.
func (w *Workload) Prerequisites() []string {
	out := slices.Clone(w.After)
	listed := map[string]bool{}
	for _, n := range AfterNames(w.After) {
		listed[n] = true
	}
	for _, u := range w.Uses {
		if n, _ := ParseUse(u); !listed[n] {
			listed[n] = true
			out = append(out, n)
		}
	}
	return out
}
