package spec

import "strings"

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

// ParseAfter splits an `after` entry into the workload it names and the
// condition waited for (AfterHealthy when the entry gives none).
func ParseAfter(entry string) (name, condition string) {
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
